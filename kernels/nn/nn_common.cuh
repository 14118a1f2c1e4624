// Device helpers shared by the nn kernels: the fused conv epilogue (bias, SiLU, residual) and the grid
// conventions. Activations are [B, C, H, W] with contiguous H*W planes addressed by a batch stride and a
// channel stride in elements (kernels/nn/plane_view.hpp): (pointer, batch_stride, channel_stride) views in the
// kernels' parameter structs (nn_params.cuh), triples of scalar arguments in conv2d_mma.
#pragma once
#include "common/lab.cuh"

namespace nn {

constexpr int kThreads = 256;  // block size of every one-thread-per-element nn kernel

// act(acc + bias): SiLU x * sigmoid(x) written as x / (1 + e^-x) (e^-x = inf gives -0 for very negative x).
__device__ __forceinline__ float bias_act(float acc, float bias, int silu) {
  const float v = acc + bias;
  return silu ? v / (1.0f + expf(-v)) : v;
}

// out[b, c, p] = act(acc + bias[c]) (+ residual[b, c, p] when residual is not null).
__device__ __forceinline__ void store_output(float acc, float bias, int silu, const float* residual,
                                             long long res_bs, long long res_cs, float* out, long long out_bs,
                                             long long out_cs, int b, int c, int p) {
  float v = bias_act(acc, bias, silu);
  if (residual) v += residual[b * res_bs + c * res_cs + p];
  out[b * out_bs + c * out_cs + p] = v;
}

}  // namespace nn
