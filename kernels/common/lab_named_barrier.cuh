// Named barriers (PTX ISA "bar.sync / bar.arrive" with a barrier id and a thread count) on both backends:
// inline PTX on NVRTC, the emulator's model on cpu (nvrtc_runtime/cpu/device/lab_emu_named_barrier.hpp,
// included first; it reports misuse and deadlocks at the call's line).
//
// A CTA has 16 hardware barriers; id 0 is __syncthreads', so these take ids 1..15. A barrier completes when
// `count` threads (a multiple of 32; whole warps take part) have reached it by sync or arrive; sync waits for
// that, arrive does not. The usual use is a turn between warpgroups: warpgroup A waits with
// lab_named_barrier_sync(id, 256) while warpgroup B signals with lab_named_barrier_arrive(id, 256).
//
//   lab_named_barrier_sync(id, count)     arrive and wait for the barrier to complete
//   lab_named_barrier_arrive(id, count)   arrive without waiting
#pragma once

#if !defined(LAB_CPU_EMULATOR)
__device__ __forceinline__ void lab_named_barrier_sync(unsigned id, unsigned count) {
  asm volatile("bar.sync %0, %1;" ::"r"(id), "r"(count) : "memory");
}

__device__ __forceinline__ void lab_named_barrier_arrive(unsigned id, unsigned count) {
  asm volatile("bar.arrive %0, %1;" ::"r"(id), "r"(count) : "memory");
}
#endif
