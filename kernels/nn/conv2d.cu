// conv2d: Conv2d (+ folded BatchNorm bias) (+ SiLU) (+ residual) of YOLO26; float32 throughout except v4,
// which multiplies on TF32 tensor cores (float accumulate).
//
// z[b, co, y, x] = sum_{ci in group, ky, kx} in[b, ci, y*s - K/2 + ky, x*s - K/2 + kx] * w[co, ci, ky, kx]
//                  + bias[co], zero padding K/2 on every side;
// out[b, co, y, x] = act(z[b, co, y, x]) (+ residual[b, co, y, x]), and pre[b, co, y, x] = z[b, co, y, x]
// when pre is not null (the pre-activation the training forward keeps for the SiLU backward).
// Layouts: in [B, C_in, H, W], out, pre and residual [B, C_out, Ho, Wo], each a (pointer, batch stride,
// channel stride) view whose H*W planes are contiguous (plane_view.hpp); residual and pre may be null. weight
// [C_out, C_in/groups, K, K] row-major, bias [C_out]. act = SiLU when silu != 0, else identity; the residual
// is added after the activation (Bottleneck x + y). out may be residual itself (each element is read, then
// written, by one thread: the training backward accumulates an input gradient so); otherwise out and pre must
// not overlap in, residual or each other.
// Variants:
//   conv2d_direct         v1: one thread per output element, any K / stride / groups (runtime values): the
//                         portable baseline. Block 256, grid (ceil(Ho*Wo / 256), C_out, B).
//   conv2d_tiled<K, TM>   v2, groups == 1: implicit GEMM. A CTA computes TM output channels x TN = 4096/TM
//                         output pixels (flattened y*Wo + x); the reduction r = (ci, ky, kx) runs in chunks
//                         of 16: the weight chunk (pre-transposed on the host to wt[r][C_out], coalesced) and
//                         the im2col chunk of the input are staged in shared memory, then each of the 256
//                         threads accumulates a 4 x 4 register tile (4 channels x 4 pixels) with float4
//                         shared reads. Grid (ceil(Ho*Wo / TN), ceil(C_out / TM), B * splits); TM in
//                         {16, 32, 64}. Split-K: when the output is too small to fill the GPU (P5 at batch 1:
//                         400 pixels, a 2304-row reduction), `splits` CTAs share one output tile, each
//                         summing `split_rows` reduction rows into partial [splits, B, C_out, Ho*Wo]; then
//                         conv2d_splitk_reduce adds the splits in a fixed order and applies the epilogue.
//   conv2d_depthwise<K>   v3, groups == C_in == C_out: a CTA covers a 32-column x 32-row output tile of one
//                         channel plane; lane l of warp w computes column l of rows 4w .. 4w + 3 straight
//                         from global memory (the K*K taps of an output are L1 hits after the lanes'
//                         neighbours' loads), its K*K weights and the channel's rows found once. At stride
//                         1 each of the 4 + K - 1 input rows under a lane's 4 outputs is loaded once and
//                         added to every output it is a tap row of (18 loads for 4 outputs at K 3, not 36;
//                         the same products in the same order): the 25 launches of a batch-32 fp16 training
//                         iteration summed 2.33 -> 1.46 ms in its launch profile (H200). The former
//                         32 x 8 tile through a shared patch (one barrier, a division per staged value, the
//                         weights loaded by every thread for one output) issued ~300 instructions per output
//                         (ncu on the H200: 86 % SM, 10 % DRAM). Block 256, grid (tiles_x * tiles_y, C, B).
//   conv2d_tf32<K, TM>    v4, groups == 1: v2's implicit GEMM on tensor cores. Same CTA tile (TM channels x
//                         TN = 4096/TM pixels), grid, 16-row chunks and split-K partials as v2 (reduced by
//                         conv2d_splitk_reduce); the staged weight and im2col chunks are rounded to TF32
//                         (10 mantissa bits, round to nearest) and each of the 8 warps accumulates 16
//                         channels x 32 pixels with wmma m16n16k8 (two float accumulator tiles). The
//                         accumulators go through shared memory (TM x TN floats) to the same epilogue as the
//                         other variants, one thread per output along pixels. Needs sm_80 or newer; the cpu
//                         emulator runs it through its wmma model. Expect rel L2 ~2e-4 against float64.
#ifndef LAB_NN_CONV2D_CU
#define LAB_NN_CONV2D_CU
#include "common/lab.cuh"
#include "common/lab_wmma.cuh"
#include "nn/conv2d_stage.cuh"
#include "nn/nn_common.cuh"
#include "nn/nn_params.cuh"

__global__ void __launch_bounds__(nn::kThreads) conv2d_direct(const lab::Conv2dDirectParams params) {
  const float* __restrict__ in = params.in.data;
  const long long in_bs = params.in.batch_stride, in_cs = params.in.channel_stride;
  const float* __restrict__ w = params.w;
  const float* __restrict__ bias = params.epi.bias;
  const float* residual = params.epi.residual.data;
  const long long res_bs = params.epi.residual.batch_stride, res_cs = params.epi.residual.channel_stride;
  float* out = params.epi.out.data;
  const long long out_bs = params.epi.out.batch_stride, out_cs = params.epi.out.channel_stride;
  float* pre = params.epi.pre.data;
  const long long pre_bs = params.epi.pre.batch_stride, pre_cs = params.epi.pre.channel_stride;
  const float* gate = params.epi.gate.data;
  const long long gate_bs = params.epi.gate.batch_stride, gate_cs = params.epi.gate.channel_stride;
  const int c_in = params.size.c_in, c_out = params.size.c_out, h_in = params.size.h_in;
  const int w_in = params.size.w_in, h_out = params.size.h_out, w_out = params.size.w_out;
  const int kernel = params.kernel, stride = params.stride, groups = params.groups, silu = params.silu;
  const int p = blockIdx.x * blockDim.x + threadIdx.x;
  if (p >= h_out * w_out) return;
  const int co = blockIdx.y, b = blockIdx.z;
  const int group_in = c_in / groups, group = co / (c_out / groups);
  const int iy0 = (p / w_out) * stride - kernel / 2, ix0 = (p % w_out) * stride - kernel / 2;
  const float* src = in + b * in_bs + (long long)(group * group_in) * in_cs;
  const float* wk = w + (long long)co * group_in * kernel * kernel;
  float acc = 0.0f;
  for (int ci = 0; ci < group_in; ++ci, src += in_cs) {
    for (int ky = 0; ky < kernel; ++ky) {
      const int iy = iy0 + ky;
      if (iy < 0 || iy >= h_in) {
        wk += kernel;
        continue;
      }
      for (int kx = 0; kx < kernel; ++kx, ++wk) {
        const int ix = ix0 + kx;
        if (ix >= 0 && ix < w_in) acc += src[iy * w_in + ix] * *wk;
      }
    }
  }
  nn::store_output(acc, bias[co], silu, residual, res_bs, res_cs, pre, pre_bs, pre_cs, gate, gate_bs, gate_cs,
                   out, out_bs, out_cs, b, co, p);
}

template <int K, int TM>
__global__ void __launch_bounds__(nn::kThreads) conv2d_tiled(const lab::Conv2dGemmParams params) {
  const float* __restrict__ in = params.in.data;
  const long long in_bs = params.in.batch_stride, in_cs = params.in.channel_stride;
  const float* __restrict__ wt = params.wt;
  const float* __restrict__ bias = params.epi.bias;
  const float* residual = params.epi.residual.data;
  const long long res_bs = params.epi.residual.batch_stride, res_cs = params.epi.residual.channel_stride;
  float* out = params.epi.out.data;
  const long long out_bs = params.epi.out.batch_stride, out_cs = params.epi.out.channel_stride;
  float* pre = params.epi.pre.data;
  const long long pre_bs = params.epi.pre.batch_stride, pre_cs = params.epi.pre.channel_stride;
  const float* gate = params.epi.gate.data;
  const long long gate_bs = params.epi.gate.batch_stride, gate_cs = params.epi.gate.channel_stride;
  const int c_in = params.size.c_in, c_out = params.size.c_out, h_in = params.size.h_in;
  const int w_in = params.size.w_in, h_out = params.size.h_out, w_out = params.size.w_out;
  const int stride = params.stride, silu = params.silu, batch = params.batch, split_rows = params.split_rows;
  float* partial = params.partial;
  constexpr int kChunk = nn::kTiledChunk;
  constexpr int TN = 4096 / TM;          // output pixels per CTA
  constexpr int kPixelThreads = TN / 4;  // threads along pixels (4 pixels each)
  __shared__ __align__(16) float w_s[kChunk][TM];
  __shared__ __align__(16) float x_s[kChunk][TN];

  const int tid = threadIdx.x, b = blockIdx.z % batch, split = blockIdx.z / batch;
  const int co0 = blockIdx.y * TM, px0 = blockIdx.x * TN;
  const int plane_out = h_out * w_out, reduction = c_in * K * K;
  const int r_begin = split * split_rows, r_end = min(reduction, r_begin + split_rows);
  const float* in_b = in + b * in_bs;

  const nn::Im2colColumn<K, TN> column(px0, plane_out, w_out, stride);

  const int ty = tid / kPixelThreads, tx = tid % kPixelThreads;  // 4 channels x 4 pixels per thread
  float acc[4][4];
#pragma unroll
  for (int i = 0; i < 4; ++i)
#pragma unroll
    for (int j = 0; j < 4; ++j) acc[i][j] = 0.0f;

  for (int r0 = r_begin; r0 < r_end; r0 += kChunk) {
    nn::stage_weight_chunk<TM, TM>(&w_s[0][0], wt, r0, r_end, co0, c_out, nn::StageAsIs{});
    column.template stage<TN>(&x_s[0][0], in_b, in_cs, r0, r_end, h_in, w_in, nn::StageAsIs{});
    __syncthreads();
#pragma unroll
    for (int rr = 0; rr < kChunk; ++rr) {
      const float4 a = *reinterpret_cast<const float4*>(&w_s[rr][ty * 4]);
      const float4 x = *reinterpret_cast<const float4*>(&x_s[rr][tx * 4]);
      const float av[4] = {a.x, a.y, a.z, a.w}, xv[4] = {x.x, x.y, x.z, x.w};
#pragma unroll
      for (int i = 0; i < 4; ++i)
#pragma unroll
        for (int j = 0; j < 4; ++j) acc[i][j] = fmaf(av[i], xv[j], acc[i][j]);
    }
    __syncthreads();
  }

#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const int co = co0 + ty * 4 + i;
    if (co >= c_out) continue;
    const float bias_co = bias[co];
    float* partial_row =
        partial ? partial + ((long long)(split * batch + b) * c_out + co) * plane_out : nullptr;
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const int p = px0 + tx * 4 + j;
      if (p >= plane_out) continue;
      if (partial_row)
        partial_row[p] = acc[i][j];
      else
        nn::store_output(acc[i][j], bias_co, silu, residual, res_bs, res_cs, pre, pre_bs, pre_cs, gate,
                         gate_bs, gate_cs, out, out_bs, out_cs, b, co, p);
    }
  }
}

// The split-K epilogue of conv2d_tiled, conv2d_tf32 and conv2d_mma: z = sum over splits of partial + bias,
// the splits added in index order; out = act(z) (+ residual), pre = z when pre is not null. Block 256, grid
// (ceil(Ho*Wo / 256), C_out, B).
__global__ void __launch_bounds__(nn::kThreads)
    conv2d_splitk_reduce(const lab::Conv2dSplitkReduceParams params) {
  const float* __restrict__ partial = params.partial;
  const int splits = params.splits;
  const float* __restrict__ bias = params.epi.bias;
  const float* residual = params.epi.residual.data;
  const long long res_bs = params.epi.residual.batch_stride, res_cs = params.epi.residual.channel_stride;
  float* out = params.epi.out.data;
  const long long out_bs = params.epi.out.batch_stride, out_cs = params.epi.out.channel_stride;
  float* pre = params.epi.pre.data;
  const long long pre_bs = params.epi.pre.batch_stride, pre_cs = params.epi.pre.channel_stride;
  const float* gate = params.epi.gate.data;
  const long long gate_bs = params.epi.gate.batch_stride, gate_cs = params.epi.gate.channel_stride;
  const int batch = params.batch, c_out = params.c_out, plane_out = params.plane_out, silu = params.silu;
  const int p = blockIdx.x * blockDim.x + threadIdx.x;
  if (p >= plane_out) return;
  const int co = blockIdx.y, b = blockIdx.z;
  const long long split_stride = (long long)batch * c_out * plane_out;
  const float* src = partial + ((long long)b * c_out + co) * plane_out + p;
  float acc = 0.0f;
  for (int s = 0; s < splits; ++s) acc += src[s * split_stride];
  nn::store_output(acc, bias[co], silu, residual, res_bs, res_cs, pre, pre_bs, pre_cs, gate, gate_bs, gate_cs,
                   out, out_bs, out_cs, b, co, p);
}

template <int K>
__global__ void __launch_bounds__(nn::kThreads) conv2d_depthwise(const lab::Conv2dDepthwiseParams params) {
  constexpr int TX = lab::kDepthwiseTileX, R = lab::kDepthwiseRows, TY = lab::kDepthwiseTileY;
  static_assert(TY == nn::kThreads / TX * R, "the tile nn_params.cuh gives the host");
  const int h_in = params.h_in, w_in = params.w_in, h_out = params.h_out, w_out = params.w_out;
  const int stride = params.stride, silu = params.silu;
  const int tiles_x = (w_out + TX - 1) / TX, c = blockIdx.y, b = blockIdx.z;
  const int ox = (blockIdx.x % tiles_x) * TX + threadIdx.x % TX;
  const int oy0 = (blockIdx.x / tiles_x) * TY + threadIdx.x / TX * R;
  if (ox >= w_out || oy0 >= h_out) return;
  const float* __restrict__ src = params.in.data + b * params.in.batch_stride + c * params.in.channel_stride;
  float wk[K * K];
#pragma unroll
  for (int i = 0; i < K * K; ++i) wk[i] = params.w[c * K * K + i];
  const float bias_c = params.epi.bias[c];
  const lab::PlaneOut out = params.epi.out, pre = params.epi.pre;
  const lab::PlaneIn res = params.epi.residual, gate = params.epi.gate;
  float* out_row = out.data + b * out.batch_stride + c * out.channel_stride;
  float* pre_row = pre.data ? pre.data + b * pre.batch_stride + c * pre.channel_stride : nullptr;
  const float* res_row = res.data ? res.data + b * res.batch_stride + c * res.channel_stride : nullptr;
  const float* gate_row = gate.data ? gate.data + b * gate.batch_stride + c * gate.channel_stride : nullptr;
  const int ix0 = ox * stride - K / 2;
  unsigned columns_in = 0;  // bit kx: input column ix0 + kx lies in the image
#pragma unroll
  for (int kx = 0; kx < K; ++kx) columns_in |= unsigned(ix0 + kx >= 0 && ix0 + kx < w_in) << kx;
  if (stride == 1) {
    // The R rows' windows overlap: each of the R + K - 1 input rows under them is read once and added to
    // every output row it is a tap row of (tap row ky = t - r), each output's products in v3's order (ky,
    // then kx, ascending; taps outside the image skipped).
    float acc[R] = {};
#pragma unroll
    for (int t = 0; t < R + K - 1; ++t) {
      const int iy = oy0 - K / 2 + t;
      if (iy < 0 || iy >= h_in) continue;
      const float* row = src + iy * w_in + ix0;
      float v[K];
#pragma unroll
      for (int kx = 0; kx < K; ++kx) v[kx] = columns_in >> kx & 1u ? row[kx] : 0.0f;
#pragma unroll
      for (int r = 0; r < R; ++r) {
        const int ky = t - r;
        if (ky < 0 || ky >= K) continue;
#pragma unroll
        for (int kx = 0; kx < K; ++kx)
          if (columns_in >> kx & 1u) acc[r] = fmaf(v[kx], wk[ky * K + kx], acc[r]);
      }
    }
#pragma unroll
    for (int r = 0; r < R; ++r)
      if (oy0 + r < h_out)
        nn::store_output_at<false>(acc[r], bias_c, silu, res_row, pre_row, gate_row, out_row,
                                   (oy0 + r) * w_out + ox);
    return;
  }
#pragma unroll
  for (int r = 0; r < R; ++r) {
    const int oy = oy0 + r;
    if (oy >= h_out) break;
    const int iy0 = oy * stride - K / 2;
    float acc = 0.0f;
#pragma unroll
    for (int ky = 0; ky < K; ++ky) {
      const int iy = iy0 + ky;
      if (iy < 0 || iy >= h_in) continue;
      const float* row = src + iy * w_in + ix0;
#pragma unroll
      for (int kx = 0; kx < K; ++kx)
        if (columns_in >> kx & 1u) acc = fmaf(row[kx], wk[ky * K + kx], acc);
    }
    nn::store_output_at<false>(acc, bias_c, silu, res_row, pre_row, gate_row, out_row, oy * w_out + ox);
  }
}

namespace nn {
// TF32 rounding of every staged value (cvt.rna, as the tensor cores expect their operands).
struct StageAsTf32 {
  __device__ __forceinline__ float operator()(float v) const { return nvcuda::wmma::__float_to_tf32(v); }
};
}  // namespace nn

template <int K, int TM>
__global__ void __launch_bounds__(nn::kThreads) conv2d_tf32(const lab::Conv2dGemmParams params) {
  const float* __restrict__ in = params.in.data;
  const long long in_bs = params.in.batch_stride, in_cs = params.in.channel_stride;
  const float* __restrict__ wt = params.wt;
  const float* __restrict__ bias = params.epi.bias;
  const float* residual = params.epi.residual.data;
  const long long res_bs = params.epi.residual.batch_stride, res_cs = params.epi.residual.channel_stride;
  float* out = params.epi.out.data;
  const long long out_bs = params.epi.out.batch_stride, out_cs = params.epi.out.channel_stride;
  float* pre = params.epi.pre.data;
  const long long pre_bs = params.epi.pre.batch_stride, pre_cs = params.epi.pre.channel_stride;
  const int c_in = params.size.c_in, c_out = params.size.c_out, h_in = params.size.h_in;
  const int w_in = params.size.w_in, h_out = params.size.h_out, w_out = params.size.w_out;
  const int stride = params.stride, silu = params.silu, batch = params.batch, split_rows = params.split_rows;
  float* partial = params.partial;
  namespace wmma = nvcuda::wmma;
  constexpr int kChunk = nn::kTiledChunk, TN = 4096 / TM;        // output pixels per CTA
  constexpr int kWarpRows = TM / 16, kWarpCols = 8 / kWarpRows;  // 8 warps over channels x pixels
  static_assert(kWarpCols * 32 == TN, "each warp owns 16 channels x 32 pixels");
  // Row pitches padded by 4 floats (16 B): wmma needs multiples of 4 and 32-byte aligned tile pointers.
  constexpr int LDW = TM + 4, LDX = TN + 4, LDO = TN + 4;
  __shared__ __align__(32) float w_s[kChunk * LDW];  // A^T: w_s[r][co]
  __shared__ __align__(32) float x_s[kChunk * LDX];  // B: x_s[r][pixel]
  __shared__ __align__(32) float o_s[TM * LDO];      // the CTA's accumulators, o_s[co][pixel]

  const int b = blockIdx.z % batch, split = blockIdx.z / batch;
  const int co0 = blockIdx.y * TM, px0 = blockIdx.x * TN;
  const int plane_out = h_out * w_out, reduction = c_in * K * K;
  const int r_begin = split * split_rows, r_end = min(reduction, r_begin + split_rows);
  const float* in_b = in + b * in_bs;
  const nn::Im2colColumn<K, TN> column(px0, plane_out, w_out, stride);
  const int warp = threadIdx.x / 32, wm = warp / kWarpCols, wn = warp % kWarpCols;

  wmma::fragment<wmma::accumulator, 16, 16, 8, float> acc[2];
  wmma::fill_fragment(acc[0], 0.0f);
  wmma::fill_fragment(acc[1], 0.0f);
  for (int r0 = r_begin; r0 < r_end; r0 += kChunk) {
    nn::stage_weight_chunk<TM, LDW>(w_s, wt, r0, r_end, co0, c_out, nn::StageAsTf32{});
    column.template stage<LDX>(x_s, in_b, in_cs, r0, r_end, h_in, w_in, nn::StageAsTf32{});
    __syncthreads();
#pragma unroll
    for (int k = 0; k < kChunk; k += 8) {
      wmma::fragment<wmma::matrix_a, 16, 16, 8, wmma::precision::tf32, wmma::col_major> a;
      wmma::load_matrix_sync(a, w_s + k * LDW + wm * 16, LDW);
#pragma unroll
      for (int j = 0; j < 2; ++j) {
        wmma::fragment<wmma::matrix_b, 16, 16, 8, wmma::precision::tf32, wmma::row_major> x;
        wmma::load_matrix_sync(x, x_s + k * LDX + wn * 32 + j * 16, LDX);
        wmma::mma_sync(acc[j], a, x, acc[j]);
      }
    }
    __syncthreads();
  }

#pragma unroll
  for (int j = 0; j < 2; ++j)
    wmma::store_matrix_sync(o_s + wm * 16 * LDO + wn * 32 + j * 16, acc[j], LDO, wmma::mem_row_major);
  __syncthreads();
  for (int i = threadIdx.x; i < TM * TN; i += nn::kThreads) {
    const int cc = i / TN, pp = i % TN, co = co0 + cc, p = px0 + pp;
    if (co >= c_out || p >= plane_out) continue;
    const float v = o_s[cc * LDO + pp];
    if (partial)
      partial[((long long)(split * batch + b) * c_out + co) * plane_out + p] = v;
    else
      // v4 applies no gate (Conv2dOp refuses one): with it its K 3 and 5 instances at TM 16 spilled.
      nn::store_output(v, bias[co], silu, residual, res_bs, res_cs, pre, pre_bs, pre_cs, nullptr, 0, 0, out,
                       out_bs, out_cs, b, co, p);
  }
}

#endif  // LAB_NN_CONV2D_CU
