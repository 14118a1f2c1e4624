// The viewer application: one GLFW window with an OpenGL 3 context, Dear ImGui, the panels in tabs, the
// frame loop (optionally driven by a script), settings persistence.
#pragma once
#include <string>

namespace lab::viewer {

struct ViewerOptions {
  std::string kernels_dir, cache_dir, config_dir;
  std::string kernel;  // opened at start (else the last one)
  std::string script, screenshot_dir;
  int width = 1600, height = 1000;
};

// Returns the process exit code (the script's, in scripted mode). Throws UsageError for bad options and
// RuntimeError when no window can be made.
int run_viewer(const ViewerOptions& options);

}  // namespace lab::viewer
