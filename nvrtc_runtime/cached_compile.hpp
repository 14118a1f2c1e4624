// One compile through the content-addressed cache, the same for both backends: the kernel source and its
// project headers read once, the cache key, loading and checking a cached entry, the compile on a miss with its
// error message, and storing the result. A backend brings only what is its own (CompileStep).
#pragma once
#include <functional>
#include <string>
#include <vector>

#include "nvrtc_runtime/compile_types.hpp"
#include "nvrtc_runtime/disk_cache.hpp"
#include "nvrtc_runtime/kernel_tree.hpp"

namespace lab {

struct SourceFile {
  std::string path;  // relative to the kernel tree
  std::string text;
};

// The request's source, then every project header it includes (in include order), read once: the key hashes
// these exact bytes and the compile step compiles them, never the tree again, so an edit saved during a
// compile cannot end up cached under the previous content's key.
using SourceSnapshot = std::vector<SourceFile>;

// What a backend brings to a cached compile.
struct CompileStep {
  std::string backend;  // "cuda" or "cpu"
  std::string target;   // "sm_90", or the host compiler's version line
  // What decides the output besides the backend, target, sources and name expressions (compiler version,
  // options, generated code), in a fixed order.
  std::vector<std::string> key_inputs;
  // Follows "compiling SOURCE" in the message of a failed compile: "" or " for the cpu backend".
  std::string failing_for;
  // On a miss: compiles `sources` into `result` (log, binary, and what else the backend keeps); false when the
  // compiler rejected them (`result.log` then says why).
  std::function<bool(const SourceSnapshot& sources, CompileResult& result)> compile;
  // The cache entry's parts that hold what `compile` produced (the log and compile time are stored for it).
  std::function<void(const CompileResult& result, CacheEntry& entry)> store;
  // Fills `result` (log and compile time already set) from a cached entry: "" when it could, else what is wrong
  // with the entry ("is incomplete"), which is then recompiled.
  std::function<std::string(CacheEntry& entry, CompileResult& result)> load;
};

// Loads `request` from `cache`, or compiles it with `step` and stores it. Throws CompileError, its diagnostics
// formatted with the lines of `tree`, when the compiler rejects the source. `note` receives the cache notes (a
// corrupt or incomplete entry, an unwritable cache) for --verbose.
CompileResult cached_compile(const KernelTree& tree, const DiskCache& cache, const CompileRequest& request,
                             const CompileStep& step, std::string* note = nullptr);

}  // namespace lab
