// What both backends' compile() and precompile() share: one module's cached compile with its --verbose line,
// and many side by side (compile_in_parallel). A backend supplies only its compile and the command it shows.
// A module that precompile() compiled has its line then: loading it from the cache afterwards (compile(), or
// precompile() again) is no compile the user sees, and writes no second line.
#pragma once
#include <functional>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "nvrtc_runtime/compile_types.hpp"
#include "nvrtc_runtime/runtime_context.hpp"

namespace lab {

class ModuleCompiler {
 public:
  // One cached compile of `request` (compile_with_nvrtc, cpu::build_kernel_module); `note` gets cache notes.
  using Compile = std::function<CompileResult(const CompileRequest& request, std::string* note)>;
  // The command that compile runs, as its --verbose line shows it.
  using CommandLine = std::function<std::string(const CompileRequest& request)>;

  ModuleCompiler(RuntimeOptions options, Compile compile, CommandLine command_line);

  // Backend::compile's result, its --verbose line written unless it loads what precompile() compiled.
  CompileResult compile(const CompileRequest& request);
  // Backend::precompile: every request into the cache side by side, a --verbose line each (else the progress).
  void precompile(const std::vector<CompileRequest>& requests);

 private:
  CompileResult logged(const CompileRequest& request, bool precompiling);

  RuntimeOptions options_;
  Compile compile_;
  CommandLine command_line_;
  std::mutex mutex_;
  std::set<std::string> precompiled_;  // cache keys of the modules precompile() wrote a line for
};

}  // namespace lab
