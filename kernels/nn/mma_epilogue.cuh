// The epilogue of the 16-bit tensor-core convs (conv2d_mma, conv2d_mma_patch): a lane's accumulators for
// output pixels p and p + 1 of one channel, several pairs at a time (two in conv2d_mma, four in
// conv2d_mma_patch), go out as one 8-byte access per plane where every view keeps pairs aligned (else one
// pixel at a time), or, under split-K, raw into the split's partial plane.
#pragma once
#include "nn/nn_common.cuh"

namespace nn {

// Every view of the epilogue keeps pixel pairs (p even) 8-byte aligned: even plane and strides, pointers on 8
// bytes.
__device__ __forceinline__ bool mma_pairs_aligned(long long plane, const float* out, long long out_bs,
                                                  long long out_cs, const float* pre, long long pre_bs,
                                                  long long pre_cs, const float* residual, long long res_bs,
                                                  long long res_cs, const float* gate, long long gate_bs,
                                                  long long gate_cs, const float* partial) {
  return ((plane | out_bs | out_cs | pre_bs | pre_cs | res_bs | res_cs | gate_bs | gate_cs) & 1) == 0 &&
         ((reinterpret_cast<unsigned long long>(out) | reinterpret_cast<unsigned long long>(pre) |
           reinterpret_cast<unsigned long long>(residual) | reinterpret_cast<unsigned long long>(gate) |
           reinterpret_cast<unsigned long long>(partial)) &
          7) == 0;
}

// One output channel's rows of image b (found once per channel): with `partial` (split-K) the split's
// partial plane and no bias, activation, residual, pre or gate.
struct MmaChannelRow {
  float bias;
  int silu;
  float* out;
  float* pre;
  const float* residual;
  const float* gate;

  __device__ __forceinline__ MmaChannelRow(int co, int b, int split, int batch, int c_out, long long plane,
                                           const float* __restrict__ bias_, int silu_, float* out_,
                                           long long out_bs, long long out_cs, float* pre_, long long pre_bs,
                                           long long pre_cs, const float* residual_, long long res_bs,
                                           long long res_cs, const float* gate_, long long gate_bs,
                                           long long gate_cs, float* partial)
      : bias(partial ? 0.0f : bias_[co]),
        silu(partial ? 0 : silu_),
        out(partial ? partial + ((long long)(split * batch + b) * c_out + co) * plane
                    : out_ + b * out_bs + co * out_cs),
        pre(pre_ && !partial ? pre_ + b * pre_bs + co * pre_cs : nullptr),
        residual(residual_ && !partial ? residual_ + b * res_bs + co * res_cs : nullptr),
        gate(gate_ && !partial ? gate_ + b * gate_bs + co * gate_cs : nullptr) {}

  // Pixels p and p + 1 (p even), `left` the pixels of the plane's row from p on (<= 0: p is past it), so
  // that p lies in the plane when left > 0 and p + 1 when left > 1; `pairs`: mma_pairs_aligned. `left` is
  // compared as it is: with the test written max(0, min(2, left)) == 2, compute-sanitizer on an H100
  // (2026-12-06) caught conv2d_mma<0, 3, 64> and <0, 1, 64> writing a pixel pair just past their output's
  // end (p = the plane), launches the emulator runs clean under --check-bounds; built here (CUDA 13.0) that
  // test is one VIMNMX.RELU with a predicate output (docs/PERFORMANCE.md, thirty-second entry).
  // N pixel pairs (v0[i], v1[i]) at p[i], left[i], as nn::store_output_at<true> would write them one
  // after another, but with every gate and residual value loaded before the first store: as far as the
  // compiler knows a store may alias a later load, so interleaved, each load waits for the store before it.
  template <int N>
  __device__ __forceinline__ void store(const float (&v0)[N], const float (&v1)[N], const int (&p)[N],
                                        const int (&left)[N], bool pairs) const {
    float2 g[N], r[N];
#pragma unroll
    for (int i = 0; i < N; ++i)
      g[i] = load(gate, p[i], left[i], pairs), r[i] = load(residual, p[i], left[i], pairs);
#pragma unroll
    for (int i = 0; i < N; ++i) {
      const float2 z = make_float2(v0[i] + bias, v1[i] + bias);
      float2 v = gate ? make_float2(silu_grad(z.x, g[i].x), silu_grad(z.y, g[i].y))
                      : make_float2(act_fast(z.x, silu), act_fast(z.y, silu));
      if (residual) v.x += r[i].x, v.y += r[i].y;
      if (pairs && left[i] > 1) {
        *reinterpret_cast<float2*>(out + p[i]) = v;
        if (pre) *reinterpret_cast<float2*>(pre + p[i]) = z;
      } else {
        if (left[i] > 0) {
          out[p[i]] = v.x;
          if (pre) pre[p[i]] = z.x;
        }
        if (left[i] > 1) {
          out[p[i] + 1] = v.y;
          if (pre) pre[p[i] + 1] = z.y;
        }
      }
    }
  }

 private:
  // A row's values at p and p + 1 where they lie in the plane (zeros elsewhere, and without the row).
  static __device__ __forceinline__ float2 load(const float* row, int p, int left, bool pairs) {
    if (!row) return make_float2(0.0f, 0.0f);
    if (pairs && left > 1) return *reinterpret_cast<const float2*>(row + p);
    return make_float2(left > 0 ? row[p] : 0.0f, left > 1 ? row[p + 1] : 0.0f);
  }
};

}  // namespace nn
