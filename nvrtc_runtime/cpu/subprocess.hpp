// Running the host compiler: argv (no shell, so paths and defines need no quoting), stdout and stderr
// captured together.
#pragma once
#include <string>
#include <vector>

namespace lab::cpu {

struct ProcessResult {
  int exit_code = -1;  // -1 when it could not start or died by a signal
  std::string output;  // stdout and stderr, interleaved
};

// Runs argv[0] (searched on PATH) and waits for it. Throws RuntimeError only when no temporary file can be
// made.
ProcessResult run_process(const std::vector<std::string>& argv);

}  // namespace lab::cpu
