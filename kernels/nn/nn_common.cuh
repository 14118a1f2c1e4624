// Device helpers shared by the nn kernels: the fused conv epilogue (bias, SiLU, residual, and the
// pre-activation the training forward keeps) and the grid conventions. Activations are [B, C, H, W] with
// contiguous H*W planes addressed by a batch stride and a channel stride in elements
// (kernels/nn/plane_view.hpp): (pointer, batch_stride, channel_stride) views in the kernels' parameter
// structs (nn_params.cuh), triples of scalar arguments in conv2d_mma.
#pragma once
#include "common/lab.cuh"

namespace nn {

constexpr int kThreads = 256;  // block size of every one-thread-per-element nn kernel

// act(v): SiLU v * sigmoid(v) written as v / (1 + e^-v) (e^-v = inf gives -0 for very negative v).
__device__ __forceinline__ float act(float v, int silu) {
  return silu ? v / (1.0f + expf(-v)) : v;
}

// act(acc + bias).
__device__ __forceinline__ float bias_act(float acc, float bias, int silu) {
  return act(acc + bias, silu);
}

// The conv epilogue at (b, c, p) of views (pointer, batch stride, channel stride): z = acc + bias;
// out[b, c, p] = act(z) (+ residual[b, c, p] when residual is not null), and pre[b, c, p] = z when pre is not
// null (the pre-activation the SiLU backward needs). Written on element indices: with channel-row pointers
// (as conv2d_mma's epilogue has them) conv2d_tiled<1, 16> spilled.
__device__ __forceinline__ void store_output(float acc, float bias, int silu, const float* residual,
                                             long long res_bs, long long res_cs, float* pre, long long pre_bs,
                                             long long pre_cs, float* out, long long out_bs, long long out_cs,
                                             int b, int c, int p) {
  const float z = acc + bias;
  float v = act(z, silu);
  if (residual) v += residual[b * res_bs + c * res_cs + p];
  out[b * out_bs + c * out_cs + p] = v;
  if (pre) pre[b * pre_bs + c * pre_cs + p] = z;  // after out: fewer registers in conv2d_tiled's epilogue
}

}  // namespace nn
