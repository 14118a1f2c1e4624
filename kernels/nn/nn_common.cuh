// Device helpers shared by the nn kernels: the fused conv epilogue (bias, SiLU, residual, the pre-activation
// the training forward keeps, and the SiLU backward an input-gradient conv applies for its producer) and the
// grid conventions. Activations are [B, C, H, W] with contiguous H*W planes addressed by a batch stride and a
// channel stride in elements (kernels/nn/plane_view.hpp): (pointer, batch_stride, channel_stride) views in the
// kernels' parameter structs (nn_params.cuh), triples of scalar arguments in conv2d_mma.
#pragma once
#include "common/lab.cuh"

namespace nn {

constexpr int kThreads = 256;  // block size of every one-thread-per-element nn kernel

// act(v): SiLU v * sigmoid(v) written as v / (1 + e^-v) (e^-v = inf gives -0 for very negative v).
__device__ __forceinline__ float act(float v, int silu) {
  return silu ? v / (1.0f + expf(-v)) : v;
}

// act() for the 16-bit-product convs (conv2d_mma): e^-v from the hardware's exp2 and the quotient from its
// reciprocal (__expf, __fdividef: relative error about 1e-6, far below the fp16 / bf16 rounding of the
// products; v below -87 still gives 0) in a third of act()'s instructions, which with per-element stores had
// made conv2d_mma's 1x1 instances issue-bound.
__device__ __forceinline__ float act_fast(float v, int silu) {
  return silu ? __fdividef(v, 1.0f + __expf(-v)) : v;
}

// g * silu'(z), silu'(z) = s (1 + z (1 - s)), s = sigmoid(z): a SiLU's backward, dz from dy = g (one formula
// for conv2d_silu_bias_backward, the gated conv epilogue and the batch-statistics BatchNorm's backward).
__device__ __forceinline__ float silu_grad(float g, float z) {
  const float s = 1.0f / (1.0f + expf(-z));
  return g * (s * (1.0f + z * (1.0f - s)));
}

// act(acc + bias).
__device__ __forceinline__ float bias_act(float acc, float bias, int silu) {
  return act(acc + bias, silu);
}

// The conv epilogue at pixel p of one channel's planes (res_row, pre_row and gate_row may be null): z = acc +
// bias; out_row[p] = act(z) (act_fast with kFast), or silu_grad(z, gate_row[p]) with a gate (an
// input-gradient conv applying its producer's SiLU backward: silu is 0 then), (+ res_row[p]), and pre_row[p]
// = z (the pre-activation the SiLU backward needs). For kernels that find a channel's rows once (conv2d_mma,
// conv2d_depthwise).
template <bool kFast>
__device__ __forceinline__ void store_output_at(float acc, float bias, int silu, const float* res_row,
                                                float* pre_row, const float* gate_row, float* out_row,
                                                int p) {
  const float z = acc + bias;
  float v = gate_row ? silu_grad(z, gate_row[p]) : kFast ? act_fast(z, silu) : act(z, silu);
  if (res_row) v += res_row[p];
  out_row[p] = v;
  if (pre_row) pre_row[p] = z;
}

// The conv epilogue at (b, c, p) of views (pointer, batch stride, channel stride): z = acc + bias;
// out[b, c, p] = act(z), or silu_grad(z, gate[b, c, p]) when gate is not null, (+ residual[b, c, p] when
// residual is not null), and pre[b, c, p] = z when pre is not null (the pre-activation the SiLU backward
// needs). store_output_at's steps on element indices: through channel-row pointers conv2d_tiled<1, 16>
// spilled.
__device__ __forceinline__ void store_output(float acc, float bias, int silu, const float* residual,
                                             long long res_bs, long long res_cs, float* pre, long long pre_bs,
                                             long long pre_cs, const float* gate, long long gate_bs,
                                             long long gate_cs, float* out, long long out_bs,
                                             long long out_cs, int b, int c, int p) {
  const float z = acc + bias;
  float v = gate ? silu_grad(z, gate[b * gate_bs + c * gate_cs + p]) : act(z, silu);
  if (residual) v += residual[b * res_bs + c * res_cs + p];
  out[b * out_bs + c * out_cs + p] = v;
  if (pre) pre[b * pre_bs + c * pre_cs + p] = z;  // after out: fewer registers in conv2d_tiled's epilogue
}

}  // namespace nn
