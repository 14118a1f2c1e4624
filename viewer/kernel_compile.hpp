// Compiling the kernel being edited for the Kernels panel: the exact compiler input, NVRTC's PTX, the SASS,
// the PTX / SASS listings with their source lines, the resource report (registers, shared memory, spills,
// occupancy: the runtime's on a GPU, else the static one), compile time,
// cache hit, and the diagnostics of a failed compile. NVRTC needs no GPU, so this works everywhere.
#pragma once
#include <string>
#include <vector>

#include "viewer/kernel_workspace.hpp"
#include "nvrtc_runtime/assembly_listing.hpp"
#include "nvrtc_runtime/static_occupancy.hpp"
#include "kernels/runner.hpp"

namespace lab::viewer {

struct CompileOutcome {
  std::string kernel, variant;
  std::string arch;
  bool ok = false;
  std::string compiler_input;  // options, name expressions and every file, as `lab source --cuda` shows them
  CompileResult result;        // on success: PTX, resources, compile time, cache hit, log
  std::vector<int> occupancy;  // resident blocks per SM per name expression (empty without a GPU)
  int occupancy_block_threads = 0;
  std::vector<StaticOccupancy> static_occupancy;  // per name expression, for the target's limits
  std::string sass;                     // or the reason there is none
  AssemblyListing ptx_listing, sass_listing;  // with source lines as kernel-tree paths (empty: none)
  std::vector<Diagnostic> diagnostics;  // of a failed compile (errors, warnings, notes)
  std::string message;                  // the formatted compile error, or another failure
};

// Compiles `variant` of `runner` at `params` (resolved). Never throws: failures land in the outcome.
CompileOutcome compile_kernel(const KernelWorkspace& ws, const Runner& runner, const std::string& variant,
                              const Params& params);

}  // namespace lab::viewer
