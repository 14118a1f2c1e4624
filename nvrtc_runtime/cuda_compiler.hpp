// NVRTC compilation (works with no GPU and no driver): options, in-memory project headers, name expressions,
// cached through cached_compile.hpp, ptxas resource report, and SASS through nvdisasm.
#pragma once
#include <string>

#include "nvrtc_runtime/compile_types.hpp"
#include "nvrtc_runtime/disk_cache.hpp"
#include "nvrtc_runtime/kernel_tree.hpp"
#include "nvrtc_runtime/module_compiler.hpp"

namespace lab {

// The CUDA toolkit directory: $CUDA_HOME, $CUDA_PATH, the parent of the `nvcc` on PATH, /usr/local/cuda.
std::string cuda_home();
// "13.0" as reported by nvrtcVersion.
std::string nvrtc_version();
// The live device's "sm_XX", or "sm_90" when there is no usable device.
std::string default_cuda_arch();

// The exact option list handed to NVRTC for a request (shown by `lab source`).
std::vector<std::string> nvrtc_options(const CompileRequest& request, const std::string& arch);
// The target NVRTC compiles `request` for on a device of `arch`: "sm_90a" for an arch_specific request on
// "sm_90" (the target of wgmma and setmaxnreg), else `arch` itself.
std::string nvrtc_target(const CompileRequest& request, const std::string& arch);

// Compiles (or loads from `cache`) to cubin + PTX for `arch` ("sm_90"); throws CompileError with formatted
// diagnostics on failure. `note` receives cache notes (corrupt entries) for --verbose.
CompileResult compile_with_nvrtc(const KernelTree& tree, const DiskCache& cache,
                                 const CompileRequest& request, const std::string& arch,
                                 std::string* note = nullptr);

// The NVRTC module compiler for `arch` over a context's tree and cache: what the cuda backend compiles with,
// and what `lab source` and resource reports use with no device (the same cache, the same --verbose line).
ModuleCompiler nvrtc_module_compiler(const RuntimeContext& context, const std::string& arch);

// SASS of a compiled cubin via nvdisasm (on PATH or in cuda_home()/bin); throws RuntimeError saying that SASS
// needs nvdisasm when it is not installed.
std::string disassemble_sass(const CompileResult& result);

// Fills registers/spills/stack/shared from a ptxas verbose log (`--ptxas-options=-v`), matching mangled names
// to `result.lowered_names`.
void parse_ptxas_resources(const std::string& log, CompileResult& result);

}  // namespace lab
