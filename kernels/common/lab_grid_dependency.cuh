// Programmatic Dependent Launch, the device side (PTX ISA "griddepcontrol", sm_90+), on both backends: inline
// PTX on NVRTC, the emulator's model on cpu (nvrtc_runtime/cpu/device/lab_emu_grid_dependency.hpp, included
// first). A kernel launched with LaunchConfig::programmatic_dependent may start while the previous kernel of
// its stream still runs; these two calls make that safe and useful:
//
//   lab_grid_dependency_wait()   waits until every prerequisite grid has completed and its memory operations
//                                are visible. Call it before the first global read of data an earlier launch
//                                wrote and before the first global write (an earlier launch may still read
//                                the buffer); work before it may only touch parameters and shared memory.
//   lab_launch_dependents()      lets the next launch of the stream start once every CTA of this grid has
//                                called it or exited. It only schedules the dependent early: the dependent's
//                                wait still waits for this grid to complete, so calling it early (before
//                                this kernel's own wait, or before its last writes) is legal; repeated calls
//                                are harmless.
//
// Below sm_90 (mma.sync portable variants compiled for older GPUs) both are no-ops, and the cuda backend
// launches plainly there (Backend::programmatic_launch).
#pragma once

#if !defined(LAB_CPU_EMULATOR)
__device__ __forceinline__ void lab_grid_dependency_wait() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}

__device__ __forceinline__ void lab_launch_dependents() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}
#endif
