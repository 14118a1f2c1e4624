// The CUDA dialect on the host: the cpu backend compiles a kernel .cu with the host C++ compiler after this
// header, so the unmodified source builds into a shared object whose threads the host runs as fibers.
// Keywords and vector types come from the CUDA headers' host support (crt/host_defines.h makes __device__,
// __global__, __host__ empty and __forceinline__/__align__ GNU attributes); this header adds the rest:
//   __shared__         -> static thread_local: one instance per host thread, and a block runs wholly on one
//                         host thread (its fibers never migrate), so every running block has its own copy
//   threadIdx ...      -> the current fiber's indices (lab_emu::tls_self, restored after every fiber switch)
//   barriers, warp collectives, atomics, math intrinsics: lab_emu_sync.hpp, lab_emu_atomics.hpp,
//   lab_emu_math.hpp; nvcuda::wmma (tf32 m16n16k8): lab_emu_wmma.hpp; the fp16/bf16 mma.sync, ldmatrix and
//   cp.async primitives of common/lab_mma.cuh: lab_emu_mma.hpp; Hopper's wgmma of common/lab_wgmma.cuh:
//   lab_emu_wgmma.hpp; the mbarriers and TMA copies of common/lab_mbarrier.cuh and common/lab_tma.cuh:
//   lab_emu_mbarrier.hpp, lab_emu_tma.hpp; the named barriers of common/lab_named_barrier.cuh:
//   lab_emu_named_barrier.hpp; Programmatic Dependent Launch's calls of common/lab_grid_dependency.cuh:
//   lab_emu_grid_dependency.hpp
#pragma once

#ifndef LAB_CPU_EMULATOR
#define LAB_CPU_EMULATOR 1
#endif

#include <cfloat>
#include <climits>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <type_traits>
#include <utility>

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <math_constants.h>
#include <vector_functions.h>
#include <vector_types.h>

#include "lab_emu_abi.hpp"

#undef __shared__
#define __shared__ static thread_local
#ifndef __launch_bounds__
#define __launch_bounds__(...)
#endif
#ifndef __grid_constant__
#define __grid_constant__
#endif

namespace lab_emu {

// Set by lab_emu_bind() after dlopen.
inline const lab_emu_host_api* host_api = nullptr;
// The CUDA thread running on this host thread right now.
inline thread_local lab_emu_thread* tls_self = nullptr;

inline uint3 thread_idx() {
  const lab_emu_dim3 d = tls_self->thread_idx;
  return uint3{d.x, d.y, d.z};
}
inline uint3 block_idx() {
  const lab_emu_dim3 d = tls_self->block->block_idx;
  return uint3{d.x, d.y, d.z};
}
inline dim3 block_dim() {
  const lab_emu_dim3 d = tls_self->block->block_dim;
  return dim3(d.x, d.y, d.z);
}
inline dim3 grid_dim() {
  const lab_emu_dim3 d = tls_self->block->grid_dim;
  return dim3(d.x, d.y, d.z);
}

// Dynamic shared memory of the running block (LAB_DYNAMIC_SHARED in common/lab.cuh); 64-byte aligned.
inline void* dynamic_shared_memory() {
  return tls_self->block->dynamic_shared;
}

// Stops the launch with an error naming the kernel, block, thread and source line.
[[noreturn]] inline void fail(const char* message, const char* file, int line) {
  host_api->fail(tls_self, message, file, line);
  __builtin_unreachable();
}

}  // namespace lab_emu

#define threadIdx (::lab_emu::thread_idx())
#define blockIdx (::lab_emu::block_idx())
#define blockDim (::lab_emu::block_dim())
#define gridDim (::lab_emu::grid_dim())
static constexpr int warpSize = 32;

// Device-side assert and trap end the launch with an error instead of aborting the process.
#undef assert
#define assert(cond) ((cond) ? void(0) : ::lab_emu::fail("assertion failed: " #cond, __FILE__, __LINE__))
#define __trap() ::lab_emu::fail("__trap() called", __FILE__, __LINE__)

#include "lab_emu_atomics.hpp"
#include "lab_emu_math.hpp"
#include "lab_emu_sync.hpp"
#include "lab_emu_wmma.hpp"
#include "lab_emu_mma.hpp"
#include "lab_emu_wgmma.hpp"
#include "lab_emu_tensor_map.hpp"
#include "lab_emu_mbarrier.hpp"
#include "lab_emu_named_barrier.hpp"
#include "lab_emu_grid_dependency.hpp"
#include "lab_emu_tma.hpp"
