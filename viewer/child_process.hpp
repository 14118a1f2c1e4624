// Isolated work for the viewer: this executable started again in a child mode (a kernel run, a pipeline run)
// with its output captured, in its own process group so a timeout kills everything it started. A child that
// faults, crashes or hangs is described in one paragraph naming the work; the viewer keeps running.
#pragma once
#include <filesystem>
#include <string>
#include <vector>

#include "nvrtc_runtime/temporary_folder.hpp"  // the private folder for a child's result and log

namespace lab::viewer {

struct ChildExit {
  std::string spawn_error;  // non-empty: the child never started
  bool timed_out = false;   // killed after the timeout
  int signal = 0;           // > 0: the child died of this signal
  int status = 0;           // the exit status otherwise
  std::string log_tail;     // the last lines of its stdout and stderr
};

// Runs `args` (args[0] the program) with stdout and stderr in `log_file`, waiting at most `timeout_s`.
ChildExit run_child_process(const std::vector<std::string>& args, const std::filesystem::path& log_file,
                            double timeout_s);

// Why a child left no usable result, as "<who>: ..." with the log tail; empty when it exited on its own and
// wrote its result file.
std::string child_failure(const ChildExit& exit, const std::string& who, double timeout_s, bool has_result);

}  // namespace lab::viewer
