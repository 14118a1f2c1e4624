// upsample_nearest2x_backward: the input gradient of nearest x2 upsampling, each input cell the sum of its
// 2x2 output block, added in the fixed order (2y, 2x), (2y, 2x+1), (2y+1, 2x), (2y+1, 2x+1):
//   dx[b, c, y, x] (+)= dy[b, c, 2y, 2x] + dy[b, c, 2y, 2x+1] + dy[b, c, 2y+1, 2x] + dy[b, c, 2y+1, 2x+1]
// Deterministic (a gather, no atomics).
//
// Layouts: grad_out [B, C, 2H, 2W] (usually a channel slice of the following Concat's gradient) and grad_in
// [B, C, H, W] views (pointer, batch stride, channel stride; contiguous planes); grad_in must not overlap
// grad_out. accumulate = 1 adds to grad_in, 0 overwrites it.
// Variant: upsample_nearest2x_backward (v1_direct): one thread per input cell, four loads through the cache.
// Block 256, grid (ceil(H*W / 256), C, B).
#ifndef LAB_NN_UPSAMPLE_NEAREST2X_BACKWARD_CU
#define LAB_NN_UPSAMPLE_NEAREST2X_BACKWARD_CU
#include "common/lab.cuh"
#include "nn/gradient_store.cuh"
#include "nn/nn_common.cuh"
#include "nn/nn_params.cuh"
#include "nn/plane_backward_params.cuh"

__global__ void __launch_bounds__(nn::kThreads)
    upsample_nearest2x_backward(const lab::UpsampleNearest2xBackwardParams params) {
  const int h_in = params.h_in, w_in = params.w_in, w_out = 2 * w_in;
  const int q = blockIdx.x * blockDim.x + threadIdx.x;
  if (q >= h_in * w_in) return;
  const int c = blockIdx.y, b = blockIdx.z;
  const int y = q / w_in, x = q % w_in;
  const float* __restrict__ dy = params.grad_out.data + b * params.grad_out.batch_stride +
                                 c * params.grad_out.channel_stride + (2 * y) * w_out + 2 * x;
  const float sum = dy[0] + dy[1] + dy[w_out] + dy[w_out + 1];
  nn::store_gradient(
      params.grad_in.data + b * params.grad_in.batch_stride + c * params.grad_in.channel_stride + q, sum,
      params.accumulate);
}

#endif  // LAB_NN_UPSAMPLE_NEAREST2X_BACKWARD_CU
