// Compile-time resource reports (registers, shared/local memory, spills, max threads, occupancy: the
// runtime's on a GPU, the static calculator's for the target architecture everywhere) for
// `lab source --resources`, `lab demo` and the viewer.
#pragma once
#include <array>
#include <optional>
#include <string>
#include <vector>

#include "nvrtc_runtime/compile_types.hpp"
#include "nvrtc_runtime/runtime_context.hpp"
#include "nvrtc_runtime/static_occupancy.hpp"
#include "harness/scenario_runner.hpp"

namespace lab {

struct ResourceReport {
  std::string label;  // "detect_decode / v1_fused"
  CompileResult result;
  int occupancy_block_threads = 0;  // the block size both occupancies are reported at
  std::vector<int> occupancy;       // the runtime's resident blocks per SM per name expression (GPU only)
  // Per name expression at occupancy_block_threads, from the target's limits; empty when the static table
  // does not know the target architecture.
  std::vector<StaticOccupancy> static_occupancy;
};

// The block size occupancy is reported at unless the caller names one (`lab source --resources
// --block-threads N`): the runners' launch configs are not visible from outside.
inline constexpr int kOccupancyBlockThreads = 256;

// On a GPU whose architecture is `arch`: compiled and loaded by the cuda backend of `backends` (max threads
// per block and occupancy filled in). Otherwise NVRTC alone, which needs no GPU. Throws CompileError.
ResourceReport compile_resources(BackendSet& backends, const CompileRequest& request, const std::string& arch,
                                 int block_threads = kOccupancyBlockThreads);

// The static occupancy of one kernel's resource use on `arch` at `block_threads`; nullopt for an architecture
// the limits table does not know.
std::optional<StaticOccupancy> occupancy_of(const ResourceUsage& usage, const std::string& arch,
                                            int block_threads);

// The occupancy cells of kernel `i`: blocks per SM (the runtime's where known, with the static figure beside
// it when they differ, else the static one), active/max warps and the limiting resource (static); "-" where
// unknown.
std::array<std::string, 3> occupancy_cells(const std::vector<int>& runtime,
                                           const std::vector<StaticOccupancy>& computed, size_t i);

}  // namespace lab
