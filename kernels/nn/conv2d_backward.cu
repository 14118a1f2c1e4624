// conv2d_backward: the backward of Conv2d (+ bias) (+ SiLU), float32, dense NCHW (conv2d_backward_params.cuh).
//
// With z = conv(x) + bias and y = silu(z) (or y = z), given dy:
//   dz[b, co, p]         = dy * silu'(z),  silu'(z) = s (1 + z (1 - s)), s = sigmoid(z)
//   dx[b, ci, iy, ix]    = sum_{co in ci's group, ky, kx : iy + K/2 - ky = oy*S, ix + K/2 - kx = ox*S}
//                          dz[b, co, oy, ox] * w[co, ci, ky, kx]
//   dw[co, ci, ky, kx]   = sum_{b, oy, ox} dz[b, co, oy, ox] * x[b, ci, oy*S - K/2 + ky, ox*S - K/2 + kx]
//   db[co]               = sum_{b, oy, ox} dz[b, co, oy, ox]
// Kernels:
//   conv2d_silu_backward       dz from dy and the forward's z, one thread per element (block 256). Both GEMMs
//                              read dz, so it is written once rather than recomputed in two prologues.
//   conv2d_dgrad_direct        v1: one thread per dx element, any K / stride / groups (depthwise included:
//                              its reduction is K*K taps). Grid (ceil(H*W / 256), C_in, B).
//   conv2d_dgrad_tiled<K, TM>  v2, groups == 1: implicit GEMM dx[ci, pixel] = sum_r w'[r, ci] * g[r, pixel]
//                              over r = (co, ky, kx), w' = the weights rearranged to [C_out*K*K, C_in] on the
//                              host, g the gathered dz (zero where the tap misses the stride grid or the
//                              output). A CTA owns TM input channels x TN = 4096/TM input pixels of one
//                              stride-phase class (the pixels with iy % S, ix % S fixed: DgradPhase), and its
//                              reduction runs over co x the taps that reach that class only (at stride 2, K 3:
//                              1, 2 or 4 of the 9 taps, where gathering all 9 left three quarters zero). 16-row
//                              chunks in shared memory, 4 x 4 accumulators per thread (conv2d_tiled's scheme).
//                              Grid (ceil(ceil(H/S) * ceil(W/S) / TN), ceil(C_in / TM), B * S * S).
//   conv2d_wgrad_direct        v1: one CTA per weight element, its 256 threads striding over (b, output pixel)
//                              then a shared-memory tree sum (deterministic). Any K / stride / groups; the
//                              depthwise weight gradient of yolo26n is this one.
//   conv2d_wgrad_tiled<K, TM>  v2, groups == 1: implicit GEMM dw[co, r] = sum_q dz[q, co] * im2col[q, r] over
//                              q = (b, output pixel), r = (ci, ky, kx). A CTA owns TM output channels x
//                              TN = 4096/TM rows r, 16-item chunks of q in shared memory, 4 x 4 per thread.
//                              The reduction (B*Ho*Wo, up to 204,800 at batch 32 640) is split over grid z:
//                              each split writes partial [split, C_out, R] and conv2d_wgrad_reduce adds the
//                              splits in index order. Split-K with a fixed-order reduction rather than float
//                              atomics: the gradients are bit-identical run to run (a resumed or repeated
//                              training step reproduces), at the cost of a workspace and one extra pass.
//                              Grid (ceil(R / TN), ceil(C_out / TM), splits).
//   conv2d_dgrad_mma<DT, K, TM>, conv2d_wgrad_mma<DT, K, TM>
//                              v3_fp16 (DT = LAB_F16) / v4_bf16 (LAB_BF16): v2's kernels (same staging, tiles,
//                              grid and split-K) with the products on tensor cores: mma.sync m16n8k16, float
//                              accumulation, the staged float values rounded to DT as each warp packs its
//                              fragments (MmaTile); dx and dW stay float32 (dW for the float32 master
//                              weights). Needs sm_80 or newer; the emulator runs its mma model.
//   conv2d_wgrad_reduce        one thread per dw element: the splits summed in index order.
//   conv2d_bias_grad           one CTA per (output channel, image): 256 threads stride over the plane, tree
//                              sum, into grad_bias at batch 1, else into partial [B, C_out], which
//                              conv2d_wgrad_reduce adds in image order (one CTA per channel, the former
//                              form, left SMs idle: 26 ms of a 156 ms training iteration at batch 32).
#ifndef LAB_NN_CONV2D_BACKWARD_CU
#define LAB_NN_CONV2D_BACKWARD_CU
#include "common/lab.cuh"
#include "common/lab_mma.cuh"
#include "nn/conv2d_backward_params.cuh"
#include "nn/conv2d_stage.cuh"
#include "nn/nn_common.cuh"

namespace nn {

// The sum of one value per thread of the CTA (kThreads threads), in a fixed tree order; every thread gets it.
__device__ __forceinline__ float block_sum(float v) {
  __shared__ float partial[kThreads];
  partial[threadIdx.x] = v;
  __syncthreads();
  for (int half = kThreads / 2; half > 0; half /= 2) {
    if (threadIdx.x < half) partial[threadIdx.x] += partial[threadIdx.x + half];
    __syncthreads();
  }
  const float sum = partial[0];
  __syncthreads();
  return sum;
}

// The products of the v2 GEMMs, C[m][n] += sum_k A[m][k] B[k][n] over one staged chunk of 16 k, A given
// transposed (a[k][m], TM columns) and B as b[k][n] (TN columns), both float rows in shared memory; a CTA tile
// of TM x TN = 4096 results. store(m, n, value) hands each result of this thread to the kernel's epilogue.
// FmaTile (v2_tiled): float FMAs, 4 x 4 results per thread, float4 shared reads.
template <int TM, int TN>
struct FmaTile {
  float acc[4][4] = {};
  int ty, tx;

  __device__ __forceinline__ FmaTile() : ty(threadIdx.x / (TN / 4)), tx(threadIdx.x % (TN / 4)) {}

  __device__ __forceinline__ void accumulate(const float (*a)[TM], const float (*b)[TN]) {
#pragma unroll
    for (int k = 0; k < kTiledChunk; ++k) {
      const float4 av4 = *reinterpret_cast<const float4*>(&a[k][ty * 4]);
      const float4 bv4 = *reinterpret_cast<const float4*>(&b[k][tx * 4]);
      const float av[4] = {av4.x, av4.y, av4.z, av4.w}, bv[4] = {bv4.x, bv4.y, bv4.z, bv4.w};
#pragma unroll
      for (int i = 0; i < 4; ++i)
#pragma unroll
        for (int j = 0; j < 4; ++j) acc[i][j] = fmaf(av[i], bv[j], acc[i][j]);
    }
  }
  template <class Store>
  __device__ __forceinline__ void store(Store store) const {
#pragma unroll
    for (int i = 0; i < 4; ++i)
#pragma unroll
      for (int j = 0; j < 4; ++j) store(ty * 4 + i, tx * 4 + j, acc[i][j]);
  }
};

// MmaTile (v3_fp16 / v4_bf16): mma.sync m16n8k16 with float accumulation; warp w owns rows 16 (w / (8 /
// (TM/16))) .. + 15 and 32 columns; the fragments are built from the float tiles, each value rounded to DT
// (round to nearest even) as it is packed, so the activations and gradients stay float32 in memory.
template <int DT, int TM, int TN>
struct MmaTile {
  static constexpr int kWarpCols = 8 / (TM / 16);
  static_assert(kWarpCols * 32 == TN, "each warp owns 16 rows x 32 columns");
  float d[4][4] = {};  // four n8 tiles: d[nt][0..1] row g, d[nt][2..3] row g + 8, columns 2t, 2t + 1
  int m0, n0, g, t;

  __device__ __forceinline__ MmaTile() {
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    m0 = (warp / kWarpCols) * 16, n0 = (warp % kWarpCols) * 32, g = lane / 4, t = lane % 4;
  }

  __device__ __forceinline__ void accumulate(const float (*a)[TM], const float (*b)[TN]) {
    const uint32_t af[4] = {lab_pack2<DT>(a[2 * t][m0 + g], a[2 * t + 1][m0 + g]),
                            lab_pack2<DT>(a[2 * t][m0 + g + 8], a[2 * t + 1][m0 + g + 8]),
                            lab_pack2<DT>(a[2 * t + 8][m0 + g], a[2 * t + 9][m0 + g]),
                            lab_pack2<DT>(a[2 * t + 8][m0 + g + 8], a[2 * t + 9][m0 + g + 8])};
#pragma unroll
    for (int pair = 0; pair < 2; ++pair) {
      const int n = n0 + pair * 16 + g;
      const uint32_t bf[4] = {lab_pack2<DT>(b[2 * t][n], b[2 * t + 1][n]),
                              lab_pack2<DT>(b[2 * t + 8][n], b[2 * t + 9][n]),
                              lab_pack2<DT>(b[2 * t][n + 8], b[2 * t + 1][n + 8]),
                              lab_pack2<DT>(b[2 * t + 8][n + 8], b[2 * t + 9][n + 8])};
      lab_mma_16816_pair<DT>(d[2 * pair], d[2 * pair + 1], af, bf);
    }
  }
  template <class Store>
  __device__ __forceinline__ void store(Store store) const {
#pragma unroll
    for (int nt = 0; nt < 4; ++nt)
#pragma unroll
      for (int e = 0; e < 4; ++e) store(m0 + g + (e / 2) * 8, n0 + nt * 8 + 2 * t + e % 2, d[nt][e]);
  }
};

// The stride-phase class of conv2d_dgrad_tiled's CTA (blockIdx.z % stride^2): the input pixels (iy, ix) with
// iy % stride == py and ix % stride == px, and the taps that reach them, ky = ky0, ky0 + stride, ... (ky0 =
// (py + K/2) % stride; likewise kx). Any other tap misses the stride grid, so the CTA's reduction runs over
// c_out x these taps only: at stride 2, K 3, 1, 2 or 4 taps of 9 (a quarter of the work on average). At stride
// 1 the one class is every pixel and every tap.
template <int K>
struct DgradPhase {
  int stride, py, px, ky0, kx0, nkx, taps, hc, wc;  // hc x wc: the class's pixels

  __device__ __forceinline__ DgradPhase(int phase, int s, int h_in, int w_in) : stride(s) {
    py = phase / s, px = phase % s;
    ky0 = (py + K / 2) % s, kx0 = (px + K / 2) % s;
    const int nky = ky0 < K ? (K - 1 - ky0) / s + 1 : 0;
    nkx = kx0 < K ? (K - 1 - kx0) / s + 1 : 0;
    taps = nky * nkx;
    hc = h_in > py ? (h_in - py + s - 1) / s : 0;
    wc = w_in > px ? (w_in - px + s - 1) / s : 0;
  }
  // Tap t of the class (t < taps) as ky * K + kx.
  __device__ __forceinline__ int tap(int t) const {
    return (ky0 + stride * (t / nkx)) * K + kx0 + stride * (t % nkx);
  }
  // The input pixel of class pixel p (p < hc * wc).
  __device__ __forceinline__ int pixel(int p, int w_in) const {
    return (py + stride * (p / wc)) * w_in + px + stride * (p % wc);
  }
};

// w_s[rr][cc] = w'[row(r0 + rr), ci0 + cc] for the class's reduction rows r = (co, class tap t), row = co * K*K
// + tap(t) of the rearranged weights w' [C_out*K*K, C_in]; 0 past the reduction or c_in.
template <int K, int TM>
__device__ __forceinline__ void stage_dgrad_weights(float (*w_s)[TM], const float* __restrict__ w,
                                                    const DgradPhase<K>& phase, int r0, int r_end, int ci0,
                                                    int c_in) {
#pragma unroll
  for (int i = threadIdx.x; i < kTiledChunk * TM; i += kThreads) {
    const int rr = i / TM, cc = i % TM, r = r0 + rr, ci = ci0 + cc;
    float v = 0.0f;
    if (r < r_end && ci < c_in) {
      const int co = r / phase.taps, row = co * K * K + phase.tap(r % phase.taps);
      v = w[(long long)row * c_in + ci];
    }
    w_s[rr][cc] = v;
  }
}

// The dz column (one input pixel of the class) a thread of conv2d_dgrad_tiled gathers: column threadIdx.x % TN
// of the CTA's class pixels, rows threadIdx.x / TN, + kThreads / TN, ... of each chunk.
template <int K, int TN>
struct DgradColumn {
  static_assert(TN <= kThreads && kThreads % TN == 0, "a thread gathers one fixed pixel column");
  int col, sy, sx;  // the pixel's row and column in the class's sub-grid
  bool valid;

  __device__ __forceinline__ DgradColumn(int px0, const DgradPhase<K>& phase) {
    col = threadIdx.x % TN;
    const int p = px0 + col;
    valid = p < phase.hc * phase.wc;
    sy = valid ? p / phase.wc : 0;
    sx = valid ? p % phase.wc : 0;
  }

  // g_s[rr][col] = dz[co, oy, ox] of row r0 + rr = (co, class tap t), 0 where the tap leaves the output. The
  // tap (ky, kx) reaches output row oy = sy + (py + K/2 - ky) / stride, an exact division.
  __device__ __forceinline__ void stage(float (*g_s)[TN], const float* __restrict__ dz_b,
                                        const DgradPhase<K>& phase, int r0, int r_end, int h_out,
                                        int w_out) const {
#pragma unroll
    for (int rr = threadIdx.x / TN; rr < kTiledChunk; rr += kThreads / TN) {
      const int r = r0 + rr;
      float v = 0.0f;
      if (valid && r < r_end) {
        const int co = r / phase.taps, t = r % phase.taps;
        const int ky = phase.ky0 + phase.stride * (t / phase.nkx), kx = phase.kx0 + phase.stride * (t % phase.nkx);
        const int oy = sy + (phase.py + K / 2 - ky) / phase.stride;
        const int ox = sx + (phase.px + K / 2 - kx) / phase.stride;
        if (oy >= 0 && oy < h_out && ox >= 0 && ox < w_out)
          v = dz_b[(long long)co * h_out * w_out + oy * w_out + ox];
      }
      g_s[rr][col] = v;
    }
  }
};

// The reduction items q = (b, output pixel) one thread visits, kStep apart from q_begin + threadIdx.x %
// kStep: wgrad_gemm's row of every chunk (kStep = kTiledChunk) or conv2d_wgrad_direct's stride over all items
// (kStep = kThreads). The image and output row and column advance without a division (the per-item 64-bit
// divisions they replace were most of both kernels' instructions).
template <int kStep>
struct ItemWalk {
  long long q;
  int b, oy, ox, step_y, step_x;

  __device__ __forceinline__ ItemWalk(long long q_begin, int h_out, int w_out) {
    q = q_begin + threadIdx.x % kStep;
    const int plane_out = h_out * w_out;
    b = int(q / plane_out);
    const int p = int(q % plane_out);
    oy = p / w_out, ox = p % w_out;
    step_y = kStep / w_out, step_x = kStep % w_out;
  }
  __device__ __forceinline__ void advance(int h_out, int w_out) {
    q += kStep;
    ox += step_x, oy += step_y;
    if (ox >= w_out) ox -= w_out, ++oy;
    for (; oy >= h_out; oy -= h_out) ++b;
  }
};

}  // namespace nn

__global__ void __launch_bounds__(nn::kThreads)
    conv2d_silu_backward(const lab::Conv2dSiluBackwardParams params) {
  const long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= params.count) return;
  const float z = params.z[i], s = 1.0f / (1.0f + expf(-z));
  params.grad_z[i] = params.grad_out[i] * (s * (1.0f + z * (1.0f - s)));
}

__global__ void __launch_bounds__(nn::kThreads) conv2d_dgrad_direct(const lab::Conv2dDgradParams params) {
  const lab::Conv2dBackwardSizes n = params.size;
  const int plane_in = n.h_in * n.w_in, plane_out = n.h_out * n.w_out;
  const int p = blockIdx.x * blockDim.x + threadIdx.x;
  if (p >= plane_in) return;
  const int ci = blockIdx.y, b = blockIdx.z, k = n.kernel, stride = n.stride;
  const int in_per_group = n.c_in / n.groups, out_per_group = n.c_out / n.groups;
  const int group = ci / in_per_group, ci_in_group = ci % in_per_group;
  const int ty0 = p / n.w_in + k / 2, tx0 = p % n.w_in + k / 2;
  float acc = 0.0f;
  for (int j = 0; j < out_per_group; ++j) {
    const int co = group * out_per_group + j;
    const float* dz = params.grad_z + ((long long)b * n.c_out + co) * plane_out;
    const float* wk = params.w + ((long long)co * in_per_group + ci_in_group) * k * k;
    for (int ky = 0; ky < k; ++ky) {
      const int ty = ty0 - ky;
      if (ty < 0 || ty % stride != 0 || ty / stride >= n.h_out) continue;
      for (int kx = 0; kx < k; ++kx) {
        const int tx = tx0 - kx;
        if (tx < 0 || tx % stride != 0 || tx / stride >= n.w_out) continue;
        acc = fmaf(dz[(ty / stride) * n.w_out + tx / stride], wk[ky * k + kx], acc);
      }
    }
  }
  params.grad_in[((long long)b * n.c_in + ci) * plane_in + p] = acc;
}

namespace nn {

// The input-gradient GEMM of one CTA (v2, v3, v4): dx[ci0 .. + TM, class pixels px0 .. + TN] of image
// blockIdx.z / stride^2, stride-phase class blockIdx.z % stride^2 (DgradPhase).
template <int K, int TM, class Tile>
__device__ __forceinline__ void dgrad_gemm(const lab::Conv2dDgradParams& params) {
  const lab::Conv2dBackwardSizes n = params.size;
  constexpr int TN = 4096 / TM;
  __shared__ __align__(16) float w_s[kTiledChunk][TM];
  __shared__ __align__(16) float g_s[kTiledChunk][TN];
  const int classes = n.stride * n.stride;
  const int b = blockIdx.z / classes, ci0 = blockIdx.y * TM, px0 = blockIdx.x * TN;
  const DgradPhase<K> phase(blockIdx.z % classes, n.stride, n.h_in, n.w_in);
  const int plane_in = n.h_in * n.w_in, class_pixels = phase.hc * phase.wc;
  if (px0 >= class_pixels) return;  // a smaller class than the grid's largest
  const int reduction = n.c_out * phase.taps;
  const float* dz_b = params.grad_z + (long long)b * n.c_out * n.h_out * n.w_out;
  const DgradColumn<K, TN> column(px0, phase);
  Tile tile;
  for (int r0 = 0; r0 < reduction; r0 += kTiledChunk) {
    stage_dgrad_weights<K, TM>(w_s, params.w, phase, r0, reduction, ci0, n.c_in);
    column.stage(g_s, dz_b, phase, r0, reduction, n.h_out, n.w_out);
    __syncthreads();
    tile.accumulate(w_s, g_s);
    __syncthreads();
  }
  float* grad_in = params.grad_in + (long long)b * n.c_in * plane_in;
  tile.store([&](int m, int p, float v) {
    if (ci0 + m < n.c_in && px0 + p < class_pixels)
      grad_in[(long long)(ci0 + m) * plane_in + phase.pixel(px0 + p, n.w_in)] = v;
  });
}

}  // namespace nn

template <int K, int TM>
__global__ void __launch_bounds__(nn::kThreads) conv2d_dgrad_tiled(const lab::Conv2dDgradParams params) {
  nn::dgrad_gemm<K, TM, nn::FmaTile<TM, 4096 / TM>>(params);
}

template <int DT, int K, int TM>
__global__ void __launch_bounds__(nn::kThreads) conv2d_dgrad_mma(const lab::Conv2dDgradParams params) {
  nn::dgrad_gemm<K, TM, nn::MmaTile<DT, TM, 4096 / TM>>(params);
}

__global__ void __launch_bounds__(nn::kThreads) conv2d_wgrad_direct(const lab::Conv2dWgradParams params) {
  const lab::Conv2dBackwardSizes n = params.size;
  const int k = n.kernel, in_per_group = n.c_in / n.groups, out_per_group = n.c_out / n.groups;
  const long long e = blockIdx.x;  // the weight element (co, ci in group, ky, kx)
  const int co = int(e / (in_per_group * k * k)), rest = int(e % (in_per_group * k * k));
  const int ci = (co / out_per_group) * in_per_group + rest / (k * k), ky = rest % (k * k) / k, kx = rest % k;
  const int plane_in = n.h_in * n.w_in, plane_out = n.h_out * n.w_out;
  const long long items = (long long)n.batch * plane_out;
  float acc = 0.0f;
  for (nn::ItemWalk<nn::kThreads> item(0, n.h_out, n.w_out); item.q < items; item.advance(n.h_out, n.w_out)) {
    const int iy = item.oy * n.stride - k / 2 + ky, ix = item.ox * n.stride - k / 2 + kx;
    if (iy < 0 || iy >= n.h_in || ix < 0 || ix >= n.w_in) continue;
    acc = fmaf(params.grad_z[((long long)item.b * n.c_out + co) * plane_out + item.oy * n.w_out + item.ox],
               params.in[((long long)item.b * n.c_in + ci) * plane_in + iy * n.w_in + ix], acc);
  }
  acc = nn::block_sum(acc);
  if (threadIdx.x == 0) params.grad_w[e] = acc;
}

namespace nn {

// The weight-gradient GEMM of one CTA (v2, v3, v4): dW[co0 .. + TM, rc0 .. + TN] over split blockIdx.z's
// items, into grad_w or the split's partial.
template <int K, int TM, class Tile>
__device__ __forceinline__ void wgrad_gemm(const lab::Conv2dWgradParams& params) {
  const lab::Conv2dBackwardSizes n = params.size;
  constexpr int kChunk = kTiledChunk, TN = 4096 / TM, kRowStep = kThreads / kChunk;
  static_assert(kThreads % kChunk == 0, "a thread stages one fixed item row of every chunk");
  __shared__ __align__(16) float g_s[kChunk][TM];  // dz[q][co]
  __shared__ __align__(16) float x_s[kChunk][TN];  // im2col[q][r]
  const int co0 = blockIdx.y * TM, rc0 = blockIdx.x * TN, split = blockIdx.z;
  const int plane_in = n.h_in * n.w_in, plane_out = n.h_out * n.w_out, rows = n.c_in * K * K;
  const long long items = (long long)n.batch * plane_out, q_begin = (long long)split * params.split_items;
  const long long q_end = min(items, q_begin + params.split_items);
  const int qq = threadIdx.x % kChunk, first = threadIdx.x / kChunk;
  ItemWalk<kChunk> item(q_begin, n.h_out, n.w_out);
  Tile tile;
  for (long long q0 = q_begin; q0 < q_end; q0 += kChunk, item.advance(n.h_out, n.w_out)) {
    // Consecutive threads take consecutive q (pixels of one plane): coalesced reads of dz and x.
    const bool live = item.q < q_end;
    const float* dz = params.grad_z + ((long long)item.b * n.c_out) * plane_out + item.oy * n.w_out + item.ox;
    const float* x = params.in + (long long)item.b * n.c_in * plane_in;
    const int iy0 = item.oy * n.stride - K / 2, ix0 = item.ox * n.stride - K / 2;
#pragma unroll
    for (int cc = first; cc < TM; cc += kRowStep) {
      const int co = co0 + cc;
      g_s[qq][cc] = live && co < n.c_out ? dz[(long long)co * plane_out] : 0.0f;
    }
#pragma unroll
    for (int rr = first; rr < TN; rr += kRowStep) {
      const int r = rc0 + rr, ci = r / (K * K), kk = r % (K * K);
      const int iy = iy0 + kk / K, ix = ix0 + kk % K;
      const bool inside = live && r < rows && iy >= 0 && iy < n.h_in && ix >= 0 && ix < n.w_in;
      x_s[qq][rr] = inside ? x[(long long)ci * plane_in + iy * n.w_in + ix] : 0.0f;
    }
    __syncthreads();
    tile.accumulate(g_s, x_s);
    __syncthreads();
  }
  float* out = params.partial ? params.partial + (long long)split * n.c_out * rows : params.grad_w;
  tile.store([&](int m, int r, float v) {
    if (co0 + m < n.c_out && rc0 + r < rows) out[(long long)(co0 + m) * rows + rc0 + r] = v;
  });
}

}  // namespace nn

template <int K, int TM>
__global__ void __launch_bounds__(nn::kThreads) conv2d_wgrad_tiled(const lab::Conv2dWgradParams params) {
  nn::wgrad_gemm<K, TM, nn::FmaTile<TM, 4096 / TM>>(params);
}

template <int DT, int K, int TM>
__global__ void __launch_bounds__(nn::kThreads) conv2d_wgrad_mma(const lab::Conv2dWgradParams params) {
  nn::wgrad_gemm<K, TM, nn::MmaTile<DT, TM, 4096 / TM>>(params);
}

__global__ void __launch_bounds__(nn::kThreads) conv2d_wgrad_reduce(const lab::Conv2dWgradReduceParams params) {
  const long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= params.count) return;
  float sum = 0.0f;
  for (int s = 0; s < params.splits; ++s) sum += params.partial[s * params.count + i];
  params.grad_w[i] = sum;
}

__global__ void __launch_bounds__(nn::kThreads) conv2d_bias_grad(const lab::Conv2dBiasGradParams params) {
  const int c = blockIdx.x, b = blockIdx.y;
  const float* dz = params.grad_z + ((long long)b * params.c_out + c) * params.plane;
  float acc = 0.0f;
  for (int p = threadIdx.x; p < params.plane; p += nn::kThreads) acc += dz[p];
  acc = nn::block_sum(acc);
  if (threadIdx.x == 0) {
    if (params.partial)
      params.partial[(long long)b * params.c_out + c] = acc;
    else
      params.grad_bias[c] = acc;
  }
}

#endif  // LAB_NN_CONV2D_BACKWARD_CU
