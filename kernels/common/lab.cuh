// Device-side prelude shared by every kernel. Both backends compile it: NVRTC for `cuda`, the host C++
// compiler (with the emulator header, which defines LAB_CPU_EMULATOR) for `cpu`. Kernels use these macros
// instead of backend-specific spellings so one source runs on both.
#pragma once

#if defined(LAB_CPU_EMULATOR)
// The emulator provides threadIdx/blockIdx, barriers, warp collectives, atomics and math on the host.
#define LAB_DYNAMIC_SHARED(type, name) type* name = reinterpret_cast<type*>(lab_emu::dynamic_shared_memory())
#else
// NVRTC: dynamic shared memory is one extern array per kernel; alignment 16 for vector loads.
#define LAB_DYNAMIC_SHARED(type, name)                      \
  extern __shared__ __align__(16) unsigned char lab_smem_[]; \
  type* name = reinterpret_cast<type*>(lab_smem_)
#endif

#define LAB_FULL_MASK 0xffffffffu

// Warp-wide sum with butterfly shuffles; every lane gets the total.
__device__ __forceinline__ float lab_warp_sum(float v) {
  for (int offset = 16; offset > 0; offset >>= 1) v += __shfl_xor_sync(LAB_FULL_MASK, v, offset);
  return v;
}

// Warp-wide maximum; every lane gets the result.
__device__ __forceinline__ float lab_warp_max(float v) {
  for (int offset = 16; offset > 0; offset >>= 1) v = fmaxf(v, __shfl_xor_sync(LAB_FULL_MASK, v, offset));
  return v;
}

// Maximum / sum over the 4 lanes of a quad (lanes 4k .. 4k + 3: the threads that share a row of an mma.sync
// or wgmma accumulator); every lane of the quad gets the result.
__device__ __forceinline__ float lab_group4_max(float v) {
  v = fmaxf(v, __shfl_xor_sync(LAB_FULL_MASK, v, 1));
  return fmaxf(v, __shfl_xor_sync(LAB_FULL_MASK, v, 2));
}
__device__ __forceinline__ float lab_group4_sum(float v) {
  v += __shfl_xor_sync(LAB_FULL_MASK, v, 1);
  return v + __shfl_xor_sync(LAB_FULL_MASK, v, 2);
}

// Integer ceiling division for grid sizes computed on the device side.
__device__ __forceinline__ int lab_ceil_div(int a, int b) { return (a + b - 1) / b; }

// Adds a and b to the two floats at `address` (global memory, 8-byte aligned) and returns nothing: on sm_90
// one vector reduction (red.global.add.v2.f32, one L2 transaction for both), elsewhere and on the emulator
// two atomicAdd (each element still added atomically, as the vector form guarantees); the emulator fails a
// misaligned address at the call's line, as the GPU faults on it.
#if defined(LAB_CPU_EMULATOR)
inline void lab_red_add_f32x2(float* address, float a, float b, const char* file = __builtin_FILE(),
                              int line = __builtin_LINE()) {
  // The GPU faults (misaligned address) on a vector reduction that is not 8-byte aligned; so does the model.
  if (reinterpret_cast<unsigned long long>(address) % 8 != 0)
    lab_emu::fail("red.global.add.v2.f32: address is not 8-byte aligned", file, line);
  atomicAdd(address, a);
  atomicAdd(address + 1, b);
}
#else
__device__ __forceinline__ void lab_red_add_f32x2(float* address, float a, float b) {
#if __CUDA_ARCH__ < 900
  atomicAdd(address, a);
  atomicAdd(address + 1, b);
#else
  asm volatile("red.global.add.v2.f32 [%0], {%1, %2};" ::"l"(address), "f"(a), "f"(b) : "memory");
#endif
}
#endif
