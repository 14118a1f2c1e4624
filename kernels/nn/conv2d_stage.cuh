// The shared-memory staging of the implicit-GEMM convs (conv2d_tiled v2, conv2d_tf32 v4): one chunk of
// kTiledChunk reduction rows r = (ci, ky, kx) of the pre-transposed weights wt [C_in*K*K, C_out] and of the
// im2col matrix of one input image. Rows past `r_end`, channels past c_out, pixels past the plane and taps in
// the zero padding stage as 0. `round` maps every staged value (identity, or TF32 rounding for v4).
#pragma once
#include "common/lab.cuh"
#include "nn/nn_common.cuh"

namespace nn {

constexpr int kTiledChunk = 16;  // reduction rows staged per step

struct StageAsIs {
  __device__ __forceinline__ float operator()(float v) const { return v; }
};

// w_s[rr * LD + cc] = round(wt[r0 + rr, co0 + cc]) for rr < kTiledChunk, cc < TM; coalesced over c_out.
template <int TM, int LD, class Round>
__device__ __forceinline__ void stage_weight_chunk(float* w_s, const float* __restrict__ wt, int r0,
                                                   int r_end, int co0, int c_out, Round round) {
#pragma unroll
  for (int i = threadIdx.x; i < kTiledChunk * TM; i += kThreads) {
    const int rr = i / TM, cc = i % TM, r = r0 + rr, co = co0 + cc;
    w_s[rr * LD + cc] = (r < r_end && co < c_out) ? round(wt[(long long)r * c_out + co]) : 0.0f;
  }
}

// The im2col column (one output pixel) a thread stages: column threadIdx.x % TN of a CTA whose pixels start
// at px0, fixed for the whole reduction; it stages rows threadIdx.x / TN, + kThreads / TN, ...
template <int K, int TN>
struct Im2colColumn {
  static_assert(TN <= kThreads && kThreads % TN == 0, "a thread stages one fixed pixel column");
  int col, iy0, ix0;
  bool valid;

  __device__ __forceinline__ Im2colColumn(int px0, int plane_out, int w_out, int stride) {
    col = threadIdx.x % TN;
    const int px = px0 + col;
    valid = px < plane_out;
    iy0 = (valid ? px / w_out : 0) * stride - K / 2;
    ix0 = (valid ? px % w_out : 0) * stride - K / 2;
  }

  // x_s[rr * LD + col] = round(im2col[r0 + rr, pixel]) of image in_b [C_in, h_in, w_in] (channel stride
  // in_cs).
  template <int LD, class Round>
  __device__ __forceinline__ void stage(float* x_s, const float* __restrict__ in_b, long long in_cs, int r0,
                                        int r_end, int h_in, int w_in, Round round) const {
#pragma unroll
    for (int rr = threadIdx.x / TN; rr < kTiledChunk; rr += kThreads / TN) {
      const int r = r0 + rr;
      float v = 0.0f;
      if (valid && r < r_end) {
        const int ci = r / (K * K), kk = r % (K * K);
        const int iy = iy0 + kk / K, ix = ix0 + kk % K;
        if (iy >= 0 && iy < h_in && ix >= 0 && ix < w_in) v = round(in_b[ci * in_cs + iy * w_in + ix]);
      }
      x_s[rr * LD + col] = v;
    }
  }
};

}  // namespace nn
