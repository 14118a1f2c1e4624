// The `cuda` backend: NVRTC cubins loaded with cudaLibraryLoadData and launched with cudaLaunchKernel through
// the static CUDA runtime (libcuda is found at run time by cudart, never linked).
#pragma once
#include <memory>

#include "nvrtc_runtime/runtime_context.hpp"

namespace lab {

// Throws UsageError("no CUDA device is available") when there is none.
std::unique_ptr<Backend> make_cuda_backend(const RuntimeContext& context);

}  // namespace lab
