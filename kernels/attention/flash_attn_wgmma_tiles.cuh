// The pieces the Hopper Flash Attention kernels (flash_attn_wgmma.cu, flash_attn_wgmma_bwd.cu) share: the
// log2-domain constants and the wgmma descriptors of a tile stored as column blocks of 64 elements (one
// 128-byte row each, in the 128-byte swizzle the TMA copies write; common/lab_swizzle.cuh): block b of a tile
// of `rows` rows starts b * rows * 64 elements in, each block 1024-byte aligned.
#pragma once

namespace fa_wgmma {

constexpr float kLog2e = 1.4426950408889634f;
constexpr float kLn2 = 0.6931471805599453f;
constexpr float kMasked = -1.0e30f;      // the score of a key past the end: finite, so max / exp make no NaN
constexpr int kStaleLog2 = 8;            // a row's maximum moves once a tile's exceeds it by this (log2)
constexpr int kColumns = 64;             // elements of one 128-byte swizzled row
constexpr unsigned kSwizzleAtom = 1024;  // 8 rows of 128 bytes: the stride between 8-row groups

// The K-major operand (rows are the product's M or N index, columns its K) of k16 step `kk`.
__device__ __forceinline__ unsigned long long k_major_desc(const uint16_t* tile, int rows, int kk) {
  return lab_wgmma_desc(tile + (kk / 4) * rows * kColumns + (kk % 4) * 16, 16, kSwizzleAtom,
                        LAB_SWIZZLE_128B);
}

// The MN-major operand (rows are the product's K index, columns its M or N) of k16 step `kk`: rows
// 16 kk .. 16 kk + 15, the column blocks rows * 128 bytes apart.
__device__ __forceinline__ unsigned long long mn_major_desc(const uint16_t* tile, int rows, int kk) {
  return lab_wgmma_desc(tile + kk * 16 * kColumns, rows * 128, kSwizzleAtom, LAB_SWIZZLE_128B);
}

}  // namespace fa_wgmma
