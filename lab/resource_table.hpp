// Compile-time resource reports (registers, shared/local memory, spills, max threads, occupancy) for
// `lab source --resources` and `lab demo`, as a table or JSON.
#pragma once
#include <ostream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "nvrtc_runtime/compile_types.hpp"
#include "nvrtc_runtime/runtime_context.hpp"
#include "scenario_runner.hpp"

namespace lab {

struct ResourceReport {
  std::string label;  // "detect_decode / v1_fused"
  CompileResult result;
  int occupancy_block_threads = 0;  // 0: no GPU, occupancy unknown
  std::vector<int> occupancy;       // resident blocks per SM, per name expression
};

// The block size occupancy is reported at (the runners' launch configs are not visible from outside).
inline constexpr int kOccupancyBlockThreads = 256;

// On a GPU whose architecture is `arch`: compiled and loaded by the cuda backend of `backends` (max threads
// per block and occupancy filled in). Otherwise NVRTC alone, which needs no GPU. Throws CompileError.
ResourceReport compile_resources(BackendSet& backends, const CompileRequest& request,
                                 const std::string& arch);

void print_resources(std::ostream& os, const std::vector<ResourceReport>& reports);
nlohmann::json resources_json(const std::vector<ResourceReport>& reports);

}  // namespace lab
