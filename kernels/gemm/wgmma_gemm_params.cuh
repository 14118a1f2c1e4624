// Parameters of wgmma_gemm (wgmma_gemm.cu), shared by the kernel and the host that launches it: plain data,
// passed by value.
#pragma once

namespace lab {

struct WgmmaGemmParams {
  const unsigned short* a;  // [m][k] 16-bit patterns (fp16 or bf16), row-major
  const unsigned short* b;  // B's [k][n] values: stored [n][k] for the K-major variants, [k][n] for MN-major
  float* c;                 // [m][n] = A * B, row-major
  int m, n, k;              // m a multiple of 64, n of the tile width BN, k of 64
};

#if defined(__CUDACC_RTC__) || defined(__CUDACC__)
#define LAB_WGMMA_GEMM_FN __host__ __device__ constexpr
#else
#define LAB_WGMMA_GEMM_FN constexpr
#endif

// Shared bytes of one stage (64 k): the A tile (64 x 64, when A is in shared memory) and the B tile (BN x 64;
// an MN-major tile narrower than a swizzled row still takes whole rows of `row_bytes`). Two stages and 1024
// bytes to align them make the launch's dynamic shared memory.
LAB_WGMMA_GEMM_FN unsigned wgmma_gemm_stage_bytes(bool a_in_shared, int bn, bool b_mn_major,
                                                  unsigned row_bytes) {
  const unsigned b_row = b_mn_major && unsigned(2 * bn) < row_bytes ? row_bytes : unsigned(2 * bn);
  return (a_in_shared ? 64u * 64u * 2u : 0u) + 64u * b_row;
}

#undef LAB_WGMMA_GEMM_FN

}  // namespace lab
