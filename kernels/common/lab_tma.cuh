// TMA bulk tensor copies (PTX ISA "cp.async.bulk.tensor") on both backends: inline PTX on NVRTC (sm_90), the
// emulator's model on cpu (nvrtc_runtime/cpu/device/lab_emu_tma.hpp, included first: copies done at issue
// time, with the map's box, out-of-bounds zero fill and swizzle, and misuse reported at the call's line).
//
// `map` is the address of a lab::TensorMap (common/lab_tensor_map.cuh) inside the kernel's parameter struct,
// which the kernel takes as `const __grid_constant__`; Backend::tensor_map made it
// (nvrtc_runtime/tensor_map.hpp). Coordinates are in elements, dimension 0 (innermost) first, and may be
// negative or past the end: those elements load as zero and are not stored. Shared addresses are 128-byte
// aligned; with a swizzled map, aligned to the pattern (8 rows of the swizzle width: 256, 512 or 1024 bytes),
// and the box sits there swizzled as common/lab_swizzle.cuh describes.
//
//   lab_tma_load_1d .. _5d(smem, map, bar, c0, ...)    box at (c0, ...) into smem; completes its bytes on the
//                                                       mbarrier `bar` (announce them with expect_tx)
//   lab_tma_load_im2col_4d(smem, map, bar, c, w, h, n, off_w, off_h)
//                                                       NHWC im2col: pixels_per_column pixels of
//                                                       channels_per_pixel channels from channel c, starting
//                                                       at pixel (w, h) of image n inside the map's bounding
//                                                       box and walking it (w fastest, then h, then n), each
//                                                       read at (w + off_w, h + off_h): one filter tap of a
//                                                       conv
//   lab_tma_store_1d .. _5d(map, smem, c0, ...)        box from smem to the tensor (elements inside it)
//   lab_tma_store_commit()                              closes the group of stores issued so far
//   lab_tma_store_wait_read<N>()                        until at most N groups still read shared memory
//   lab_tma_prefetch_map(map)                           prefetch.tensormap
// Shared memory written by ordinary stores must be fenced (lab_fence_proxy_async_shared,
// common/lab_wgmma.cuh) by each writing thread before a barrier that precedes the TMA store reading it.
#pragma once

// NVRTC resolves no include relative to a header: a kernel includes common/lab_mma.cuh,
// common/lab_tensor_map.cuh and common/lab_mbarrier.cuh first (and common/lab_wgmma.cuh for the fence), then
// this file.

#if !defined(LAB_CPU_EMULATOR)

__device__ __forceinline__ unsigned long long lab_tma_map_address(const void* map) {
  return reinterpret_cast<unsigned long long>(map);
}

__device__ __forceinline__ void lab_tma_load_1d(void* smem, const void* map, uint64_t* bar, int c0) {
  asm volatile(
      "cp.async.bulk.tensor.1d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], [%1, {%3}], "
      "[%2];" ::"r"(lab_smem_address(smem)),
      "l"(lab_tma_map_address(map)), "r"(lab_smem_address(bar)), "r"(c0)
      : "memory");
}
__device__ __forceinline__ void lab_tma_load_2d(void* smem, const void* map, uint64_t* bar, int c0, int c1) {
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], [%1, {%3, "
      "%4}], "
      "[%2];" ::"r"(lab_smem_address(smem)),
      "l"(lab_tma_map_address(map)), "r"(lab_smem_address(bar)), "r"(c0), "r"(c1)
      : "memory");
}
__device__ __forceinline__ void lab_tma_load_3d(void* smem, const void* map, uint64_t* bar, int c0, int c1,
                                                int c2) {
  asm volatile(
      "cp.async.bulk.tensor.3d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], [%1, {%3, %4, "
      "%5}], "
      "[%2];" ::"r"(lab_smem_address(smem)),
      "l"(lab_tma_map_address(map)), "r"(lab_smem_address(bar)), "r"(c0), "r"(c1), "r"(c2)
      : "memory");
}
__device__ __forceinline__ void lab_tma_load_4d(void* smem, const void* map, uint64_t* bar, int c0, int c1,
                                                int c2, int c3) {
  asm volatile(
      "cp.async.bulk.tensor.4d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], [%1, {%3, %4, "
      "%5, "
      "%6}], [%2];" ::"r"(lab_smem_address(smem)),
      "l"(lab_tma_map_address(map)), "r"(lab_smem_address(bar)), "r"(c0), "r"(c1), "r"(c2), "r"(c3)
      : "memory");
}
__device__ __forceinline__ void lab_tma_load_5d(void* smem, const void* map, uint64_t* bar, int c0, int c1,
                                                int c2, int c3, int c4) {
  asm volatile(
      "cp.async.bulk.tensor.5d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], [%1, {%3, %4, "
      "%5, "
      "%6, %7}], [%2];" ::"r"(lab_smem_address(smem)),
      "l"(lab_tma_map_address(map)), "r"(lab_smem_address(bar)), "r"(c0), "r"(c1), "r"(c2), "r"(c3), "r"(c4)
      : "memory");
}

__device__ __forceinline__ void lab_tma_load_im2col_4d(void* smem, const void* map, uint64_t* bar, int c,
                                                       int w, int h, int n, unsigned short offset_w,
                                                       unsigned short offset_h) {
  asm volatile(
      "cp.async.bulk.tensor.4d.shared::cluster.global.im2col.mbarrier::complete_tx::bytes [%0], [%1, {%3, "
      "%4, %5, "
      "%6}], [%2], {%7, %8};" ::"r"(lab_smem_address(smem)),
      "l"(lab_tma_map_address(map)), "r"(lab_smem_address(bar)), "r"(c), "r"(w), "r"(h), "r"(n),
      "h"(offset_w), "h"(offset_h)
      : "memory");
}

__device__ __forceinline__ void lab_tma_store_1d(const void* map, const void* smem, int c0) {
  asm volatile("cp.async.bulk.tensor.1d.global.shared::cta.tile.bulk_group [%0, {%2}], [%1];" ::"l"(
                   lab_tma_map_address(map)),
               "r"(lab_smem_address(smem)), "r"(c0)
               : "memory");
}
__device__ __forceinline__ void lab_tma_store_2d(const void* map, const void* smem, int c0, int c1) {
  asm volatile("cp.async.bulk.tensor.2d.global.shared::cta.tile.bulk_group [%0, {%2, %3}], [%1];" ::"l"(
                   lab_tma_map_address(map)),
               "r"(lab_smem_address(smem)), "r"(c0), "r"(c1)
               : "memory");
}
__device__ __forceinline__ void lab_tma_store_3d(const void* map, const void* smem, int c0, int c1, int c2) {
  asm volatile("cp.async.bulk.tensor.3d.global.shared::cta.tile.bulk_group [%0, {%2, %3, %4}], [%1];" ::"l"(
                   lab_tma_map_address(map)),
               "r"(lab_smem_address(smem)), "r"(c0), "r"(c1), "r"(c2)
               : "memory");
}
__device__ __forceinline__ void lab_tma_store_4d(const void* map, const void* smem, int c0, int c1, int c2,
                                                 int c3) {
  asm volatile(
      "cp.async.bulk.tensor.4d.global.shared::cta.tile.bulk_group [%0, {%2, %3, %4, %5}], [%1];" ::"l"(
          lab_tma_map_address(map)),
      "r"(lab_smem_address(smem)), "r"(c0), "r"(c1), "r"(c2), "r"(c3)
      : "memory");
}
__device__ __forceinline__ void lab_tma_store_5d(const void* map, const void* smem, int c0, int c1, int c2,
                                                 int c3, int c4) {
  asm volatile(
      "cp.async.bulk.tensor.5d.global.shared::cta.tile.bulk_group [%0, {%2, %3, %4, %5, %6}], [%1];" ::"l"(
          lab_tma_map_address(map)),
      "r"(lab_smem_address(smem)), "r"(c0), "r"(c1), "r"(c2), "r"(c3), "r"(c4)
      : "memory");
}

__device__ __forceinline__ void lab_tma_store_commit() {
  asm volatile("cp.async.bulk.commit_group;" ::: "memory");
}

template <int PENDING>
__device__ __forceinline__ void lab_tma_store_wait_read() {
  asm volatile("cp.async.bulk.wait_group.read %0;" ::"n"(PENDING) : "memory");
}

__device__ __forceinline__ void lab_tma_prefetch_map(const void* map) {
  asm volatile("prefetch.tensormap [%0];" ::"l"(lab_tma_map_address(map)) : "memory");
}

#endif  // LAB_CPU_EMULATOR (the emulator defines the same functions in lab_emu_tma.hpp)
