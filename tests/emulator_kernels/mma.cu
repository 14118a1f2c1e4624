// Emulator test kernels: the fp16 / bfloat16 and tf32 tensor-core primitives of common/lab_mma.cuh. Every
// lane builds or reads its registers by hand from the PTX layouts documented there, so the same expectations
// check the emulator and the tensor cores.
//
// mma_matmul<DT>: c_out = a * b + c_in through lab_mma_16816<DT>, for a [M][KD] and b [KD][N] (16-bit
//   patterns of type DT, row-major) and c [M][N] float (row-major); M a multiple of 32, N of 8, KD of 16. One
//   warp per 16 x 8 output tile. Grid (N / 8, M / 32); block 64 (two warps, stacked along M).
// ldmatrix_all: copies a 32 x 24 tile of 16-bit values to shared memory; lane l gives the row address
//   tile + offsets[l] (a multiple of 8 elements) to lab_ldmatrix_x4, _x4_trans, _x2 and _x2_trans and writes
//   their registers to out[l * 12 + 0-3, 4-7, 8-9, 10-11]. Block 32.
// pack_convert<DT>: packed[i] = lab_pack2<DT>(in[2i], in[2i + 1]); back[2i], back[2i + 1] = lab_to_float<DT>
//   of its low and high half; i < pairs. Grid ceil(pairs / 64); block 64.
// cp_async_fill: 512 float4 into shared memory by lab_cp_async_16 in two committed groups, valid for
//   j < valid (src holds only those), then out[j] = the shared copy. Block 128.
// mma_tf32_matmul<SPLIT>: c_out = a * b + c_in through lab_mma_1688_tf32 for float a [M][KD], b [KD][N] and c
//   [M][N] (row-major; M a multiple of 32, N of 8, KD of 8), grid and block as mma_matmul. SPLIT false: each
//   operand's bit pattern goes in as it is (the test passes tf32 values); true: 3xTF32 (lab_split_tf32,
//   lab_mma_1688_3xtf32) on any floats.
// tf32_convert: out[i] = lab_to_tf32(in[i]) (bit patterns); i < count. Grid ceil(count / 64); block 64.
// mma_divergent: lanes 0-15 call lab_mma_16816 while lanes 16-31 return (mode 0), wait at __syncwarp
//   (mode 1) or wait at __syncthreads (mode 2): wrong on purpose, for the emulator's error. Block 32.
#include "../../kernels/common/lab.cuh"
#include "../../kernels/common/lab_mma.cuh"

// p[row][col] (low half) and p[row][col + 1] of a row-major matrix with `ld` columns.
__device__ uint32_t row_pair(const uint16_t* p, int ld, int row, int col) {
  return uint32_t(p[row * ld + col]) | uint32_t(p[row * ld + col + 1]) << 16;
}
// p[row][col] (low half) and p[row + 1][col].
__device__ uint32_t column_pair(const uint16_t* p, int ld, int row, int col) {
  return uint32_t(p[row * ld + col]) | uint32_t(p[(row + 1) * ld + col]) << 16;
}

template <int DT>
__global__ void mma_matmul(const uint16_t* __restrict__ a, const uint16_t* __restrict__ b, const float* c_in,
                           float* c_out, int n, int kd) {
  const int g = threadIdx.x % 32 / 4, t = threadIdx.x % 4;
  const int m0 = (blockIdx.y * 2 + threadIdx.x / 32) * 16, n0 = blockIdx.x * 8;
  const int top = (m0 + g) * n + n0 + 2 * t, bottom = top + 8 * n;  // D[g][2t] and D[g + 8][2t]
  float d[4] = {c_in[top], c_in[top + 1], c_in[bottom], c_in[bottom + 1]};
  for (int k0 = 0; k0 < kd; k0 += 16) {
    const uint32_t fa[4] = {row_pair(a, kd, m0 + g, k0 + 2 * t), row_pair(a, kd, m0 + g + 8, k0 + 2 * t),
                            row_pair(a, kd, m0 + g, k0 + 2 * t + 8),
                            row_pair(a, kd, m0 + g + 8, k0 + 2 * t + 8)};
    const uint32_t fb[2] = {column_pair(b, n, k0 + 2 * t, n0 + g), column_pair(b, n, k0 + 2 * t + 8, n0 + g)};
    lab_mma_16816<DT>(d, fa, fb);
  }
  c_out[top] = d[0];
  c_out[top + 1] = d[1];
  c_out[bottom] = d[2];
  c_out[bottom + 1] = d[3];
}

template <bool SPLIT>
__global__ void mma_tf32_matmul(const float* __restrict__ a, const float* __restrict__ b, const float* c_in,
                                float* c_out, int n, int kd) {
  const int g = threadIdx.x % 32 / 4, t = threadIdx.x % 4;
  const int m0 = (blockIdx.y * 2 + threadIdx.x / 32) * 16, n0 = blockIdx.x * 8;
  const int top = (m0 + g) * n + n0 + 2 * t, bottom = top + 8 * n;  // D[g][2t] and D[g + 8][2t]
  float d[4] = {c_in[top], c_in[top + 1], c_in[bottom], c_in[bottom + 1]};
  for (int k0 = 0; k0 < kd; k0 += 8) {
    const float fa[4] = {a[(m0 + g) * kd + k0 + t], a[(m0 + g + 8) * kd + k0 + t],
                         a[(m0 + g) * kd + k0 + t + 4], a[(m0 + g + 8) * kd + k0 + t + 4]};
    const float fb[2] = {b[(k0 + t) * n + n0 + g], b[(k0 + t + 4) * n + n0 + g]};
    if (SPLIT) {
      uint32_t a_hi[4], a_lo[4], b_hi[2], b_lo[2];
      for (int i = 0; i < 4; ++i) lab_split_tf32(fa[i], a_hi[i], a_lo[i]);
      for (int i = 0; i < 2; ++i) lab_split_tf32(fb[i], b_hi[i], b_lo[i]);
      lab_mma_1688_3xtf32(d, a_hi, a_lo, b_hi, b_lo);
    } else {
      const uint32_t ua[4] = {__float_as_uint(fa[0]), __float_as_uint(fa[1]), __float_as_uint(fa[2]),
                              __float_as_uint(fa[3])};
      const uint32_t ub[2] = {__float_as_uint(fb[0]), __float_as_uint(fb[1])};
      lab_mma_1688_tf32(d, ua, ub);
    }
  }
  c_out[top] = d[0];
  c_out[top + 1] = d[1];
  c_out[bottom] = d[2];
  c_out[bottom + 1] = d[3];
}

extern "C" __global__ void tf32_convert(const float* __restrict__ in, uint32_t* __restrict__ out, int count) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < count) out[i] = lab_to_tf32(in[i]);
}

extern "C" __global__ void ldmatrix_all(const uint16_t* __restrict__ tile, const int* __restrict__ offsets,
                                        uint32_t* __restrict__ out) {
  __shared__ __align__(16) uint16_t s[32 * 24];
  const int lane = threadIdx.x;
  for (int i = lane; i < 32 * 24; i += 32) s[i] = tile[i];
  __syncthreads();
  uint32_t x4[4], x4t[4], x2[2], x2t[2];
  lab_ldmatrix_x4(x4, s + offsets[lane]);
  lab_ldmatrix_x4_trans(x4t, s + offsets[lane]);
  lab_ldmatrix_x2(x2, s + offsets[lane]);
  lab_ldmatrix_x2_trans(x2t, s + offsets[lane]);
  uint32_t* o = out + lane * 12;
  for (int i = 0; i < 4; ++i) {
    o[i] = x4[i];
    o[4 + i] = x4t[i];
  }
  for (int i = 0; i < 2; ++i) {
    o[8 + i] = x2[i];
    o[10 + i] = x2t[i];
  }
}

template <int DT>
__global__ void pack_convert(const float* __restrict__ in, uint32_t* __restrict__ packed,
                             float* __restrict__ back, int pairs) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= pairs) return;
  const uint32_t p = lab_pack2<DT>(in[2 * i], in[2 * i + 1]);
  packed[i] = p;
  back[2 * i] = lab_to_float<DT>(uint16_t(p & 0xffffu));
  back[2 * i + 1] = lab_to_float<DT>(uint16_t(p >> 16));
}

extern "C" __global__ void cp_async_fill(const float4* src, float4* out, int valid) {
  __shared__ __align__(16) float4 s[512];
  for (int j = threadIdx.x; j < 512; j += 128) s[j] = make_float4(-1.0f, -2.0f, -3.0f, -4.0f);
  __syncthreads();
  for (int group = 0; group < 2; ++group) {
    for (int j = group * 256 + threadIdx.x; j < (group + 1) * 256; j += 128)
      lab_cp_async_16(&s[j], src + j, j < valid);
    lab_cp_async_commit();
  }
  lab_cp_async_wait<1>();
  lab_cp_async_wait<0>();
  __syncthreads();
  for (int j = threadIdx.x; j < 512; j += 128) out[j] = s[j];
}

extern "C" __global__ void mma_divergent(float* out, int mode) {
  const uint32_t a[4] = {0x3c003c00u, 0x3c003c00u, 0x3c003c00u, 0x3c003c00u},
                 b[2] = {0x3c003c00u, 0x3c003c00u};
  float d[4] = {0.0f, 0.0f, 0.0f, 0.0f};
  if (threadIdx.x >= 16) {
    if (mode == 0) return;
    if (mode == 1)
      __syncwarp();
    else
      __syncthreads();
  } else {
    lab_mma_16816<LAB_F16>(d, a, b);
  }
  out[threadIdx.x] = d[0];
}
