// The shared-memory swizzle patterns of Hopper's tensor-memory paths (wgmma matrix descriptors and TMA
// tensor maps): where a 16-byte chunk of a logical row really lies; and the wgmma matrix descriptor's bit
// encoding, which names a swizzle mode. One definition for every side: NVRTC
// kernels that fill swizzled tiles with ordinary stores, the cpu emulator's wgmma and TMA models, and host
// code (plain C++, no CUDA headers needed).
//
// A swizzle mode of width W bytes (32, 64 or 128) permutes the 16-byte chunks inside each W-byte row of a
// repeating pattern of 8 such rows (a pattern of 8 * W bytes: 256, 512 or 1024, starting at an address that
// is a multiple of its size): address bits 4.. (the chunk, log2(W / 16) bits) are XORed with the same number
// of bits from bit 7 up. Within an aligned pattern of rows W bytes long that is
//   chunk'(row, chunk) = chunk ^ ((row * W / 128) % (W / 16))
// i.e. 128B: chunk ^ (row % 8), 64B: chunk ^ (row / 2 % 4), 32B: chunk ^ (row / 4 % 2). The modes are
// numbered as the wgmma descriptor's bits 62-63 encode them (PTX ISA, "Matrix Descriptor Format").
//
// The cpu backend also ships this file among its emulator headers (host_compiler.cpp), so the emulator's
// models include it as "lab_swizzle.cuh" while kernels include it from the tree: a classic include guard
// (not #pragma once) makes the two copies one.
#ifndef LAB_SWIZZLE_CUH
#define LAB_SWIZZLE_CUH

#define LAB_SWIZZLE_NONE 0
#define LAB_SWIZZLE_128B 1
#define LAB_SWIZZLE_64B 2
#define LAB_SWIZZLE_32B 3

#if defined(__CUDACC_RTC__) || defined(__CUDACC__)
#define LAB_SWIZZLE_FN __host__ __device__ __forceinline__ constexpr
#else
#define LAB_SWIZZLE_FN constexpr
#endif

// Bytes of one swizzled row: 128, 64 or 32; 16 (one chunk, nothing permuted) for LAB_SWIZZLE_NONE.
LAB_SWIZZLE_FN unsigned lab_swizzle_row_bytes(int mode) {
  return mode == LAB_SWIZZLE_128B  ? 128u
         : mode == LAB_SWIZZLE_64B ? 64u
         : mode == LAB_SWIZZLE_32B ? 32u
                                   : 16u;
}

// The shared-memory byte address where the byte at logical address `address` lies under `mode`. The address
// is absolute (the hardware swizzles address bits), so a tile written through this function reads back
// correctly by wgmma / TMA when the tile starts on a pattern boundary (8 * row bytes) or the reader uses the
// same absolute addresses.
LAB_SWIZZLE_FN unsigned lab_swizzle_address(int mode, unsigned address) {
  const unsigned chunk_mask = lab_swizzle_row_bytes(mode) / 16u - 1u;  // 7, 3, 1 or 0
  return address ^ (((address >> 7) & chunk_mask) << 4);
}

// The physical 16-byte chunk of logical chunk `chunk` (< row bytes / 16) in row `row` of a pattern-aligned
// tile whose rows are exactly the mode's row bytes long.
LAB_SWIZZLE_FN unsigned lab_swizzle_chunk(int mode, unsigned row, unsigned chunk) {
  const unsigned row_bytes = lab_swizzle_row_bytes(mode);
  return (lab_swizzle_address(mode, row * row_bytes + chunk * 16u) % row_bytes) / 16u;
}

// The 64-bit wgmma matrix descriptor of a matrix at shared `address` (PTX ISA, "Matrix Descriptor Format"):
// bits 0-13 the start address, 16-29 the leading and 32-45 the stride byte offset, each (x & 0x3ffff) >> 4
// (so 16-byte units below 256 KiB); bits 49-51 the base offset, 0 here (the swizzle pattern is taken from
// the absolute address bits); bits 62-63 the swizzle mode.
LAB_SWIZZLE_FN unsigned long long lab_wgmma_desc_bits(unsigned address, unsigned leading_bytes,
                                                      unsigned stride_bytes, int swizzle) {
  return (unsigned long long)((address & 0x3ffffu) >> 4) |
         (unsigned long long)((leading_bytes & 0x3ffffu) >> 4) << 16 |
         (unsigned long long)((stride_bytes & 0x3ffffu) >> 4) << 32 | (unsigned long long)(swizzle & 3) << 62;
}

#undef LAB_SWIZZLE_FN

#endif  // LAB_SWIZZLE_CUH
