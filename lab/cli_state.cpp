// Global options and the runtime context built from them.
#include "lab/cli_state.hpp"

#include <cstdlib>

#include "nvrtc_runtime/errors.hpp"
#include "lab/progress.hpp"

namespace lab {

RuntimeContext CliState::context() const {
  RuntimeContext ctx;
  ctx.tree = KernelTree::select(kernels_dir);
  ctx.cache =
      std::make_shared<DiskCache>(cache_dir.empty() ? DiskCache::from_environment() : DiskCache(cache_dir));
  ctx.options.arch = arch;
  ctx.options.verbose = verbose;
  ctx.options.check_bounds = check_bounds;
  ctx.options.timeout_seconds = timeout;
  show_compile_progress();
  return ctx;
}

std::filesystem::path CliState::scenarios_directory() const {
  if (!scenarios_dir.empty()) return scenarios_dir;
  if (const char* env = std::getenv("LAB_SCENARIOS_DIR"); env && *env) return env;
  return LAB_DEFAULT_SCENARIOS_DIR;
}

void add_global_options(CLI::App& app, CliState& state) {
  app.add_option("--kernels-dir", state.kernels_dir,
                 "Editable kernel source tree to compile from (default: $LAB_KERNELS_DIR, else the sources "
                 "embedded in this binary)");
  app.add_option("--cache-dir", state.cache_dir,
                 "Compile cache directory (default: $LAB_CACHE_DIR, else $XDG_CACHE_HOME/yolo26-lab)");
  app.add_option("--scenarios-dir", state.scenarios_dir,
                 "Scenario directory for list, bench and demo (default: $LAB_SCENARIOS_DIR, else the "
                 "checkout's scenarios/)");
  app.add_option("--arch", state.arch, "Compile target, e.g. sm_90 (default: the live GPU's, else sm_90)");
  app.add_flag("-v,--verbose", state.verbose, "Print cache notes and compile commands to stderr");
  app.add_flag("--check-bounds", state.check_bounds, "cpu backend: guard pages around every buffer");
  app.add_option("--timeout", state.timeout,
                 "cpu backend: fail a launch whose kernel thread runs this many seconds of CPU time without "
                 "exiting or reaching a barrier (0: no limit)")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
}

Params parse_param_args(const std::vector<std::string>& args) {
  Params params;
  for (const std::string& arg : args) {
    const size_t eq = arg.find('=');
    if (eq == std::string::npos || eq == 0) throw UsageError("--param expects NAME=VALUE, got '" + arg + "'");
    params[arg.substr(0, eq)] = arg.substr(eq + 1);
  }
  return params;
}

}  // namespace lab
