// mbarriers (PTX ISA "Parallel Synchronization and Communication Instructions: mbarrier") and the fences
// around them, on both backends: inline PTX on NVRTC (sm_90: expect-tx and try_wait.parity), the emulator's
// model on cpu (nvrtc_runtime/cpu/device/lab_emu_mbarrier.hpp, included first; it also reports misuse and
// deadlocks at the call's line).
//
// An mbarrier is one uint64_t in shared memory, 8-byte aligned. lab_mbarrier_init(bar, count) gives each
// phase `count` expected arrivals; a phase completes when all its arrivals are in and its transaction count
// (bytes announced by expect_tx, taken off by the TMA copies that complete on it, common/lab_tma.cuh) is
// back to zero. Phases alternate parity 0, 1, 0, ...: a consumer of the k-th phase waits with
// lab_mbarrier_wait_parity(bar, k & 1). Initialise from one thread, then lab_fence_mbarrier_init() and
// __syncthreads() before any other thread (or the copy engine) uses it.
//
//   lab_mbarrier_init(bar, count)            count in 1..2^20-1
//   lab_mbarrier_arrive(bar)                 one arrival
//   lab_mbarrier_expect_tx(bar, bytes)       announce bytes without arriving
//   lab_mbarrier_arrive_expect_tx(bar, b)    announce, then arrive (the producer of a TMA stage)
//   lab_mbarrier_complete_tx(bar, bytes)     take bytes off as a copy landing would (tests, hand-made copies)
//   lab_mbarrier_try_wait_parity(bar, p)     true once the phase of parity p has completed (may time out:
//                                            false is no proof that it has not)
//   lab_mbarrier_wait_parity(bar, p)         loops on try_wait
//   lab_mbarrier_inval(bar)                  before the memory is reused for something else
//   lab_fence_mbarrier_init()                fence.mbarrier_init.release.cluster after init
// The fence that makes ordinary shared-memory writes visible to the copy engine (before a TMA store of them),
// fence.proxy.async.shared::cta, is lab_fence_proxy_async_shared of common/lab_wgmma.cuh.
#pragma once

// NVRTC resolves no include relative to a header: a kernel includes common/lab_mma.cuh (lab_smem_address)
// first, then this file.

#if !defined(LAB_CPU_EMULATOR)
typedef unsigned long long uint64_t;

__device__ __forceinline__ void lab_mbarrier_init(uint64_t* bar, unsigned count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(lab_smem_address(bar)), "r"(count) : "memory");
}

__device__ __forceinline__ void lab_mbarrier_inval(uint64_t* bar) {
  asm volatile("mbarrier.inval.shared::cta.b64 [%0];" ::"r"(lab_smem_address(bar)) : "memory");
}

__device__ __forceinline__ void lab_mbarrier_arrive(uint64_t* bar) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" ::"r"(lab_smem_address(bar)) : "memory");
}

__device__ __forceinline__ void lab_mbarrier_expect_tx(uint64_t* bar, unsigned bytes) {
  asm volatile("mbarrier.expect_tx.relaxed.cta.shared::cta.b64 [%0], %1;" ::"r"(lab_smem_address(bar)),
               "r"(bytes)
               : "memory");
}

__device__ __forceinline__ void lab_mbarrier_arrive_expect_tx(uint64_t* bar, unsigned bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(lab_smem_address(bar)),
               "r"(bytes)
               : "memory");
}

__device__ __forceinline__ void lab_mbarrier_complete_tx(uint64_t* bar, unsigned bytes) {
  asm volatile("mbarrier.complete_tx.relaxed.cta.shared::cta.b64 [%0], %1;" ::"r"(lab_smem_address(bar)),
               "r"(bytes)
               : "memory");
}

__device__ __forceinline__ bool lab_mbarrier_try_wait_parity(uint64_t* bar, unsigned parity) {
  uint32_t done;
  asm volatile(
      "{\n"
      ".reg .pred p;\n"
      "mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n"
      "selp.u32 %0, 1, 0, p;\n"
      "}"
      : "=r"(done)
      : "r"(lab_smem_address(bar)), "r"(parity)
      : "memory");
  return done != 0;
}

__device__ __forceinline__ void lab_mbarrier_wait_parity(uint64_t* bar, unsigned parity) {
  while (!lab_mbarrier_try_wait_parity(bar, parity)) {
  }
}

__device__ __forceinline__ void lab_fence_mbarrier_init() {
  asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
}

#endif  // LAB_CPU_EMULATOR (the emulator defines the same functions in lab_emu_mbarrier.hpp)
