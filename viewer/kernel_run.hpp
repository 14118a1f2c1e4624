// Running a kernel for the Run panel in a child process (this executable in --run-child mode), so that an
// edited kernel that faults (illegal address), crashes the emulator or hangs is reported with the kernel's
// name while the viewer keeps running. The child writes its result — metrics, verdicts and the output and
// reference arrays for the diff heatmap — into a safetensors file the parent reads back.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "kernels/runner.hpp"

namespace lab::viewer {

struct RunRequest {
  std::string kernel, variant, backend;
  Params params;  // as given; the child resolves them
  uint64_t seed = 1;
  std::optional<Tolerance> tolerance;  // a scenario case's, else the runner's
  std::string kernels_dir, cache_dir;
  double timeout_s = 300;
};

struct RunOutcome {
  bool ran = false;  // the kernel ran and was checked
  bool pass = false;
  double time_ms = 0;
  std::string device;
  std::vector<OutputCheck> checks;
  std::vector<Diagnostic> diagnostics;  // when the kernel did not compile
  std::string failure;                  // compile error, fault, crash, hang: one paragraph
};

// Parent side: spawns the child, waits (killing it after `timeout_s`), reads its result. Never throws.
RunOutcome run_in_child(const RunRequest& request);

// Child side (`lab-viewer --run-child ...`): runs the kernel and writes `result_file`. Returns the exit code.
int run_child_main(const RunRequest& request, const std::string& result_file);

}  // namespace lab::viewer
