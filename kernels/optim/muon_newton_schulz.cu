// muon_orthogonalize: Muon's zeropower_via_newtonschulz5 on a [rows, cols] matrix (a conv weight's update
// reshaped to [out, in * kh * kw]), in float32 on both backends:
//   X = G / (||G||_F + 1e-7), transposed when rows > cols so that X X^T is the smaller Gram matrix;
//   five times: A = X X^T, B = b A + c A A, X = a X + B X, with (a, b, c) = (3.4445, -4.7750, 2.0315);
//   the result transposed back and scaled by sqrt(max(1, rows / cols)).
//   muon_normalize   one block of 256 threads: the Frobenius norm in float64 (a fixed-order shared-memory
//                    tree), then the scaled, possibly transposed copy.
//   muon_gemm        grid (ceil(n / 16), ceil(m / 16)), block 16 x 16: C = alpha A B + beta D through
//                    strides, 16 x 16 tiles staged in shared memory, one output per thread.
// The host op (muon_op.hpp) chains 1 + 3 x 5 launches. Ultralytics runs the iterations in bf16; this is the
// float32 form (docs/kernels/optim.md).
#include "common/lab.cuh"
#include "optim/muon_params.cuh"

__global__ void muon_normalize(const lab::MuonNormalizeParams p) {
  __shared__ double sums[256];
  const long long count = (long long)p.rows * p.cols;
  double sum = 0.0;
  for (long long i = threadIdx.x; i < count; i += 256) sum += double(p.g[i]) * double(p.g[i]);
  sums[threadIdx.x] = sum;
  __syncthreads();
  for (int width = 128; width > 0; width /= 2) {
    if (int(threadIdx.x) < width) sums[threadIdx.x] += sums[threadIdx.x + width];
    __syncthreads();
  }
  const float inv = float(1.0 / (sqrt(sums[0]) + double(p.eps)));
  const bool transpose = p.rows > p.cols;
  for (long long i = threadIdx.x; i < count; i += 256) {
    const long long r = i / p.cols, c = i % p.cols;
    p.x[transpose ? c * p.rows + r : i] = p.g[i] * inv;
  }
}

__global__ void muon_gemm(const lab::MuonGemmParams p) {
  __shared__ float a_s[lab::kMuonTile][lab::kMuonTile + 1];
  __shared__ float b_s[lab::kMuonTile][lab::kMuonTile + 1];
  const int tx = int(threadIdx.x), ty = int(threadIdx.y);
  const int i = int(blockIdx.y) * lab::kMuonTile + ty, j = int(blockIdx.x) * lab::kMuonTile + tx;
  float acc = 0.0f;
  for (int k0 = 0; k0 < p.k; k0 += lab::kMuonTile) {
    const int ka = k0 + tx, kb = k0 + ty;
    a_s[ty][tx] = i < p.m && ka < p.k ? p.a[i * p.a_row + ka * p.a_col] : 0.0f;
    b_s[ty][tx] = kb < p.k && j < p.n ? p.b[kb * p.b_row + j * p.b_col] : 0.0f;
    __syncthreads();
    for (int kk = 0; kk < lab::kMuonTile; ++kk) acc += a_s[ty][kk] * b_s[kk][tx];
    __syncthreads();
  }
  if (i >= p.m || j >= p.n) return;
  float out = p.alpha * acc;
  if (p.beta != 0.0f) out += p.beta * p.d[i * p.d_row + j * p.d_col];
  p.c[i * p.c_row + j * p.c_col] = out;
}
