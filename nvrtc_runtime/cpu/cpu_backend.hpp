// The `cpu` backend: kernels compiled by the host C++ compiler with the emulator headers and run on host
// threads (blocks) and fibers (CUDA threads). docs/emulator.md describes the model and its limits.
#pragma once
#include <memory>

#include "nvrtc_runtime/runtime_context.hpp"

namespace lab {

// Worker threads: $LAB_CPU_THREADS if set, else std::thread::hardware_concurrency(). With
// context.options.check_bounds, buffers get guard pages and out-of-bounds accesses fail the launch.
std::unique_ptr<Backend> make_cpu_backend(const RuntimeContext& context);

}  // namespace lab
