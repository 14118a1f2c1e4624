// The options that say where kernels come from, where compiles are cached, where scenarios live and how the
// backends run, as plain data (the `lab` CLI binds its global options to them, the viewer fills them for its
// child runs), and the runtime context made from them.
#pragma once
#include <filesystem>
#include <string>

#include "nvrtc_runtime/runtime_context.hpp"

namespace lab {

struct ContextOptions {
  std::string kernels_dir;    // empty: $LAB_KERNELS_DIR, else the embedded tree
  std::string cache_dir;      // empty: $LAB_CACHE_DIR, else the XDG cache
  std::string scenarios_dir;  // empty: $LAB_SCENARIOS_DIR, else the checkout's scenarios/
  std::string arch;           // empty: the live device's, or sm_90
  bool verbose = false;
  bool check_bounds = false;
  double timeout = kDefaultCpuTimeoutSeconds;  // cpu backend: CPU seconds a kernel thread may run stuck
  bool no_pdl = false;  // plain launches only, no Programmatic Dependent Launch (A/B measurement)

  // The kernel tree, compile cache and runtime options; also shows parallel compiles as a progress line on a
  // terminal.
  RuntimeContext context() const;
  std::filesystem::path scenarios_directory() const;
};

}  // namespace lab
