// wgmma_gemm: C = A * B in fp16 / bf16 with float accumulation on Hopper's warpgroup tensor cores (wgmma
// m64nNk16): the probe of the wgmma layer (common/lab_wgmma.cuh) and of the emulator's model of it, one
// instance per swizzle mode, B layout and operand form.
//
// Layout (WgmmaGemmParams): A [m][k] row-major; B [n][k] for the K-major variants (B_MN 0), [k][n] for the
// MN-major ones (B_MN 1); C [m][n] float. Grid (n / BN, m / 64); block 128, one warpgroup, which computes a
// 64 x BN tile of C in BN / 2 float registers per thread. K is walked in chunks of 64 through two stages of
// shared memory: while the products of one chunk run (wait_group<1> keeps one group in flight), the threads
// stage the next chunk with ordinary 16-byte loads and stores, then fence.proxy.async and a barrier publish
// it to the tensor cores. FORM 0 (SS): A and B from shared memory; FORM 1 (RS): A's fragments loaded from
// global memory into registers, B from shared memory. The first product has scale_d 0, the accumulators
// start as NaN: a scale_d that is not honoured shows.
//
// Shared tiles, in the canonical layouts of lab_wgmma.cuh, W = the swizzle mode's row bytes (16 for none), E
// = W / 2 elements: a tile of R logical rows of L elements (K-major operand: R = its M or N rows, L = 64 k;
// MN-major B: R = 64 k, L = BN n) keeps its columns in panels of E, panel p at p * R * W, row r at r * W in
// it; each 16-byte chunk then moves to lab_swizzle_address of its offset (tiles start on 1024-byte
// boundaries of the shared window, so offsets swizzle like addresses). Descriptors: K-major, step s of 16 k
// at the chunk 2 s (+32 bytes within a swizzled row), SBO 8 W, LBO R * 16 without swizzle (the next 8 k;
// unused, 16, with); MN-major, row 16 s, and without swizzle LBO 128 (8 k) and SBO 64 * 16 (8 n), with
// swizzle LBO 64 * W (the next panel of n) and SBO 8 W (8 k).
#include "common/lab.cuh"
#include "common/lab_wgmma.cuh"
#include "gemm/wgmma_gemm_params.cuh"

namespace wgmma_gemm_detail {

constexpr int kChunkK = 64;  // k per stage

// Offset of 16-byte chunk c of logical row r in a tile of `rows` rows with W-byte rows, before the swizzle.
template <int W>
__device__ __forceinline__ unsigned tile_offset(unsigned rows, unsigned r, unsigned c) {
  constexpr unsigned chunks_per_row = W / 16;
  return c / chunks_per_row * rows * W + r * W + c % chunks_per_row * 16;
}

// Copies a rows x (row_elements) block of `src` (row pitch `pitch` elements) into a swizzled tile.
template <int SW>
__device__ __forceinline__ void stage_tile(unsigned char* tile, const unsigned short* src, int pitch,
                                           unsigned rows, unsigned row_elements) {
  const unsigned chunks = row_elements / 8;
  for (unsigned i = threadIdx.x; i < rows * chunks; i += blockDim.x) {
    const unsigned r = i / chunks, c = i % chunks;
    const uint4 v = *reinterpret_cast<const uint4*>(src + size_t(r) * pitch + c * 8);
    *reinterpret_cast<uint4*>(
        tile + lab_swizzle_address(SW, tile_offset<lab_swizzle_row_bytes(SW)>(rows, r, c))) = v;
  }
}

// The descriptor of step s (k = 16 s .. 16 s + 15 of the chunk) of a K-major tile of `rows` rows.
template <int SW>
__device__ __forceinline__ unsigned long long k_major_desc(const unsigned char* tile, unsigned rows, int s) {
  constexpr unsigned W = lab_swizzle_row_bytes(SW);
  return lab_wgmma_desc(tile + tile_offset<W>(rows, 0, 2 * s), SW == LAB_SWIZZLE_NONE ? rows * 16 : 16, 8 * W,
                        SW);
}

// The descriptor of step s of an MN-major tile of 64 rows of k.
template <int SW>
__device__ __forceinline__ unsigned long long mn_major_desc(const unsigned char* tile, int s) {
  constexpr unsigned W = lab_swizzle_row_bytes(SW);
  return SW == LAB_SWIZZLE_NONE ? lab_wgmma_desc(tile + 16 * s * W, 8 * W, kChunkK * W, SW)
                                : lab_wgmma_desc(tile + 16 * s * W, kChunkK * W, 8 * W, SW);
}

// A's fragment of rows m0 + 16 w.., columns k0..k0 + 15 (layout in lab_wgmma.cuh), from global memory.
__device__ __forceinline__ void load_a_fragment(uint32_t (&a)[4], const unsigned short* a_rows, int pitch,
                                                int k0) {
  const unsigned t = threadIdx.x % 128, g = t % 32 / 4, q = t % 4;
  const unsigned short* top = a_rows + size_t(16 * (t / 32) + g) * pitch + k0 + 2 * q;
  const unsigned short* bottom = top + 8 * size_t(pitch);
  a[0] = *reinterpret_cast<const uint32_t*>(top);
  a[1] = *reinterpret_cast<const uint32_t*>(bottom);
  a[2] = *reinterpret_cast<const uint32_t*>(top + 8);
  a[3] = *reinterpret_cast<const uint32_t*>(bottom + 8);
}

}  // namespace wgmma_gemm_detail

template <int DT, int BN, int FORM, int B_MN, int SW>
__global__ void __launch_bounds__(128) wgmma_gemm(const lab::WgmmaGemmParams p) {
  using namespace wgmma_gemm_detail;
  LAB_DYNAMIC_SHARED(unsigned char, raw);
  unsigned char* smem = lab_smem_align_1024(raw);
  const unsigned a_bytes = FORM == 0 ? 64 * kChunkK * 2 : 0;  // 64 rows of 128 bytes in any layout
  const unsigned stage_bytes = lab::wgmma_gemm_stage_bytes(FORM == 0, BN, B_MN, lab_swizzle_row_bytes(SW));
  const int m0 = blockIdx.y * 64, n0 = blockIdx.x * BN, chunks = p.k / kChunkK;
  const unsigned short* a_rows = p.a + size_t(m0) * p.k;

  auto stage = [&](int chunk) {
    unsigned char* st = smem + chunk % 2 * stage_bytes;
    const int k0 = chunk * kChunkK;
    if (FORM == 0) stage_tile<SW>(st, a_rows + k0, p.k, 64, kChunkK);
    if (B_MN)
      stage_tile<SW>(st + a_bytes, p.b + size_t(k0) * p.n + n0, p.n, kChunkK, BN);
    else
      stage_tile<SW>(st + a_bytes, p.b + size_t(n0) * p.k + k0, p.k, BN, kChunkK);
    lab_fence_proxy_async_shared();
  };

  float d[BN / 2];
#pragma unroll
  for (int i = 0; i < BN / 2; ++i) d[i] = __int_as_float(0x7fffffff);
  lab_wgmma_hold(d);
  stage(0);
  __syncthreads();
  for (int chunk = 0; chunk < chunks; ++chunk) {
    const unsigned char* st = smem + chunk % 2 * stage_bytes;
    uint32_t a[kChunkK / 16][4];
    if (FORM == 1)
#pragma unroll
      for (int s = 0; s < kChunkK / 16; ++s) load_a_fragment(a[s], a_rows, p.k, chunk * kChunkK + 16 * s);
    lab_wgmma_fence();
#pragma unroll
    for (int s = 0; s < kChunkK / 16; ++s) {
      const unsigned long long b_desc =
          B_MN ? mn_major_desc<SW>(st + a_bytes, s) : k_major_desc<SW>(st + a_bytes, BN, s);
      const int scale_d = chunk > 0 || s > 0;
      if (FORM == 0)
        lab_wgmma_ss<DT, BN, 0, B_MN>(d, k_major_desc<SW>(st, 64, s), b_desc, scale_d);
      else
        lab_wgmma_rs<DT, BN, B_MN>(d, a[s], b_desc, scale_d);
    }
    lab_wgmma_commit_group();
    lab_wgmma_hold(d);
    lab_wgmma_wait_group<1>();  // the previous chunk's products are done: its stage is free
    if (chunk + 1 < chunks) stage(chunk + 1);
    __syncthreads();
  }
  lab_wgmma_wait_group<0>();
  lab_wgmma_hold(d);

  const unsigned t = threadIdx.x, g = t % 32 / 4, q = t % 4;
  float* c = p.c + size_t(m0 + 16 * (t / 32) + g) * p.n + n0 + 2 * q;
#pragma unroll
  for (int j = 0; j < BN / 8; ++j)
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      c[size_t(8 * h) * p.n + 8 * j] = d[4 * j + 2 * h];
      c[size_t(8 * h) * p.n + 8 * j + 1] = d[4 * j + 2 * h + 1];
    }
}
