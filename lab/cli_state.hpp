// The global options every verb shares (--kernels-dir, --cache-dir, --arch, --verbose, --check-bounds,
// --timeout, --scenarios-dir), the exit status the verbs report, and the runtime objects made from those options.
#pragma once
#include <filesystem>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "nvrtc_runtime/runtime_context.hpp"
#include "kernels/runner.hpp"

namespace lab {

struct CliState {
  std::string kernels_dir;    // empty: $LAB_KERNELS_DIR, else the embedded tree
  std::string cache_dir;      // empty: $LAB_CACHE_DIR, else the XDG cache
  std::string scenarios_dir;  // empty: $LAB_SCENARIOS_DIR, else the checkout's scenarios/
  std::string arch;           // empty: the live device's, or sm_90
  bool verbose = false;
  bool check_bounds = false;
  double timeout = kDefaultCpuTimeoutSeconds;  // cpu backend: CPU seconds a kernel thread may run stuck
  int exit_code = 0;  // a verb sets 1 when a check fails; errors are exceptions

  RuntimeContext context() const;
  std::filesystem::path scenarios_directory() const;
};

// Registers the global options on the top-level app (they are accepted before or after the verb).
void add_global_options(CLI::App& app, CliState& state);

// "k=v" arguments of --param into Params; throws UsageError for text without '='.
Params parse_param_args(const std::vector<std::string>& args);

}  // namespace lab
