// The report of a launch profile (Backend::start_launch_profile): the samples summed per kernel instance
// (and per kind of copy or fill), as a table for the terminal and as JSON.
#pragma once
#include <ostream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "nvrtc_runtime/backend.hpp"

namespace lab {

struct KernelTotal {
  std::string kernel;  // the entry's name expression, or kCopyToDevice / kCopyToHost / kFill
  int launches = 0;
  double ms = 0;                  // summed over its launches
  unsigned long long blocks = 0;  // summed grid sizes (0 for copies and fills)
};

// One row per kernel instance, the most time first (ties: by name).
std::vector<KernelTotal> kernel_totals(const std::vector<LaunchSample>& samples);

// "kernel, launches, ms, share, mean, mean CTAs" for the first `rows` totals, then one line for the rest and
// the sum; `span_ms` (the profiled work's own time) names what the launch times leave out.
void print_launch_profile(std::ostream& os, const std::vector<KernelTotal>& totals, size_t rows, double span_ms);

// {"timing": "as launched" or "alone", "span_ms", "launch_ms", "kernels": the totals, "launches": every
// sample in launch order (kernel, ctas, ms, start_ms, lane), to tell the launches of one kernel instance
// apart}.
nlohmann::json launch_profile_json(const std::vector<LaunchSample>& samples, double span_ms,
                                   LaunchProfileTiming timing);

}  // namespace lab
