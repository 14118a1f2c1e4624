// Emulator test kernels: the TF32 warp matrix API (nvcuda::wmma m16n16k8) and __float_to_tf32.
//
// wmma_matmul<A_ROW, B_ROW, C_ROW>: c_out = round_tf32(a) * round_tf32(b) + c_in for a [M, KD], b [KD, N],
//   c [M, N] (M, N multiples of 16, KD a multiple of 8). a is stored row-major [M][KD] when A_ROW, else
//   column-major [KD][M]; b row-major [KD][N] when B_ROW, else [N][KD]; c_in and c_out row-major [M][N] when
//   C_ROW, else [N][M]. The inputs are rounded element-wise on the loaded fragments. One warp per 16 x 16
//   output tile. Grid (N / 16, M / 32); block 64 (two warps, stacked along M).
// tf32_round: out[i] = __float_to_tf32(in[i]) for i < n. Grid ceil(n / 64); block 64.
#include "../../kernels/common/lab.cuh"
#include "../../kernels/common/lab_wmma.cuh"

template <int ROW>
struct wmma_layout {
  using type = nvcuda::wmma::row_major;
};
template <>
struct wmma_layout<0> {
  using type = nvcuda::wmma::col_major;
};

template <int A_ROW, int B_ROW, int C_ROW>
__global__ void wmma_matmul(const float* __restrict__ a, const float* __restrict__ b, const float* c_in,
                            float* c_out, int m, int n, int kd) {
  namespace wmma = nvcuda::wmma;
  const int m0 = (blockIdx.y * 2 + threadIdx.x / 32) * 16, n0 = blockIdx.x * 16;
  const wmma::layout_t c_layout = C_ROW ? wmma::mem_row_major : wmma::mem_col_major;
  const int c_offset = C_ROW ? m0 * n + n0 : n0 * m + m0, c_ldm = C_ROW ? n : m;
  wmma::fragment<wmma::accumulator, 16, 16, 8, float> acc;
  wmma::load_matrix_sync(acc, c_in + c_offset, c_ldm, c_layout);
  for (int k0 = 0; k0 < kd; k0 += 8) {
    wmma::fragment<wmma::matrix_a, 16, 16, 8, wmma::precision::tf32, typename wmma_layout<A_ROW>::type> fa;
    wmma::fragment<wmma::matrix_b, 16, 16, 8, wmma::precision::tf32, typename wmma_layout<B_ROW>::type> fb;
    wmma::load_matrix_sync(fa, A_ROW ? a + m0 * kd + k0 : a + k0 * m + m0, A_ROW ? kd : m);
    wmma::load_matrix_sync(fb, B_ROW ? b + k0 * n + n0 : b + n0 * kd + k0, B_ROW ? n : kd);
    for (int i = 0; i < fa.num_elements; ++i) fa.x[i] = wmma::__float_to_tf32(fa.x[i]);
    for (int i = 0; i < fb.num_elements; ++i) fb.x[i] = wmma::__float_to_tf32(fb.x[i]);
    wmma::mma_sync(acc, fa, fb, acc);
  }
  wmma::store_matrix_sync(c_out + c_offset, acc, c_ldm, c_layout);
}

extern "C" __global__ void tf32_round(const float* __restrict__ in, float* __restrict__ out, int n) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = nvcuda::wmma::__float_to_tf32(in[i]);
}
