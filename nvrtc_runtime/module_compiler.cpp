// ModuleCompiler: the timed compile, its --verbose line, and the keys precompile() stored.
#include "nvrtc_runtime/module_compiler.hpp"

#include <chrono>

#include "nvrtc_runtime/compile_log.hpp"
#include "nvrtc_runtime/parallel_compile.hpp"

namespace lab {

ModuleCompiler::ModuleCompiler(RuntimeOptions options, Compile compile, CommandLine command_line)
    : options_(std::move(options)), compile_(std::move(compile)), command_line_(std::move(command_line)) {}

CompileResult ModuleCompiler::compile(const CompileRequest& request) {
  return logged(request, false);
}

void ModuleCompiler::precompile(const std::vector<CompileRequest>& requests) {
  compile_in_parallel(
      requests, [this](const CompileRequest& request) { return logged(request, true); }, options_.verbose);
}

CompileResult ModuleCompiler::logged(const CompileRequest& request, bool precompiling) {
  std::string note;
  const auto started = std::chrono::steady_clock::now();
  CompileResult result = compile_(request, &note);
  bool repeat = false;  // a cache hit of a module whose line precompile() wrote
  {
    std::lock_guard lock(mutex_);
    repeat = result.cache_hit && precompiled_.count(result.cache_key) > 0;
    if (precompiling) precompiled_.insert(result.cache_key);
  }
  if (options_.verbose && !repeat) log_compile(options_, request, result, command_line_(request), started, note);
  return result;
}

}  // namespace lab
