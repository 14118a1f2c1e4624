// The runtime context and the scenario folder made from ContextOptions.
#include "harness/context.hpp"

#include <cstdlib>

#include "harness/progress.hpp"

namespace lab {

RuntimeContext ContextOptions::context() const {
  RuntimeContext ctx;
  ctx.tree = KernelTree::select(kernels_dir);
  ctx.cache =
      std::make_shared<DiskCache>(cache_dir.empty() ? DiskCache::from_environment() : DiskCache(cache_dir));
  ctx.options.arch = arch;
  ctx.options.verbose = verbose;
  ctx.options.check_bounds = check_bounds;
  ctx.options.timeout_seconds = timeout;
  ctx.options.programmatic_launch = !no_pdl;
  show_compile_progress();
  return ctx;
}

std::filesystem::path ContextOptions::scenarios_directory() const {
  if (!scenarios_dir.empty()) return scenarios_dir;
  if (const char* env = std::getenv("LAB_SCENARIOS_DIR"); env && *env) return env;
  return LAB_DEFAULT_SCENARIOS_DIR;
}

}  // namespace lab
