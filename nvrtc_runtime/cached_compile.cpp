// cached_compile: snapshot, key, cache hit or compile, error message, store.
#include "nvrtc_runtime/cached_compile.hpp"

#include <chrono>
#include <cstdlib>

#include "nvrtc_runtime/diagnostics.hpp"
#include "nvrtc_runtime/sha256.hpp"

namespace lab {
namespace {

// Names the layout of the key below; changing what the key hashes or in which order means a new name, so no
// old entry is ever read under a key made another way.
constexpr const char* kKeyLayout = "lab cache key 2";

SourceSnapshot snapshot_sources(const KernelTree& tree, const std::string& source_path) {
  SourceSnapshot files{{source_path, tree.read(source_path)}};
  for (const std::string& header : tree.includes_of(source_path)) files.push_back({header, tree.read(header)});
  return files;
}

std::string cache_key(const CompileStep& step, const SourceSnapshot& sources,
                      const std::vector<std::string>& name_expressions) {
  Sha256 key;
  key.field(kKeyLayout).field(step.backend).field(step.target);
  for (const std::string& input : step.key_inputs) key.field(input);
  for (const SourceFile& file : sources) key.field(file.path).field(file.text);
  for (const std::string& name : name_expressions) key.field(name);
  return key.hex();
}

}  // namespace

CompileResult cached_compile(const KernelTree& tree, const DiskCache& cache, const CompileRequest& request,
                             const CompileStep& step, std::string* note) {
  const SourceSnapshot sources = snapshot_sources(tree, request.source_path);
  CompileResult fresh;
  fresh.backend = step.backend;
  fresh.target = step.target;
  fresh.name_expressions = request.name_expressions;
  fresh.cache_key = cache_key(step, sources, request.name_expressions);

  CompileResult result = fresh;
  if (std::optional<CacheEntry> entry = cache.load(result.cache_key, note)) {
    result.log = entry->parts["log"];
    result.compile_ms = std::atof(entry->parts["compile_ms"].c_str());
    const std::string wrong = step.load(*entry, result);
    if (wrong.empty()) {
      result.cache_hit = true;
      result.diagnostics = parse_compiler_log(result.log);
      return result;
    }
    if (note) *note = "cache entry " + result.cache_key + " " + wrong + ": recompiling";
    result = fresh;
  }

  const auto t0 = std::chrono::steady_clock::now();
  const bool compiled = step.compile(sources, result);
  result.compile_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  result.diagnostics = parse_compiler_log(result.log);
  if (!compiled) {
    std::string formatted = format_diagnostics(result.diagnostics, &tree);
    if (formatted.empty()) formatted = result.log;
    throw CompileError("compiling " + request.source_path + step.failing_for + " failed:\n" + formatted,
                       result.diagnostics, result.log);
  }
  CacheEntry entry;
  step.store(result, entry);
  entry.parts["log"] = result.log;
  entry.parts["compile_ms"] = std::to_string(result.compile_ms);
  entry.parts["summary"] = step.backend + " " + step.target + " " + request.source_path;
  cache.store(result.cache_key, entry, note);
  return result;
}

}  // namespace lab
