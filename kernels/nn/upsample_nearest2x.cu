// upsample_nearest2x: nearest-neighbour x2 upsampling, out[b, c, y, x] = in[b, c, y / 2, x / 2].
//
// Layouts: in [B, C, H, W] and out [B, C, 2H, 2W] views (pointer, batch stride, channel stride; contiguous
// planes); out is usually a channel slice of the following Concat's buffer. out must not overlap in.
// Variant: upsample_nearest2x (v1_direct): one thread per output element (coalesced stores, each input read
// by 4 neighbouring threads from the cache). Block 256, grid (ceil(4*H*W / 256), C, B).
#ifndef LAB_NN_UPSAMPLE_NEAREST2X_CU
#define LAB_NN_UPSAMPLE_NEAREST2X_CU
#include "common/lab.cuh"
#include "nn/nn_common.cuh"
#include "nn/nn_params.cuh"

__global__ void __launch_bounds__(nn::kThreads)
    upsample_nearest2x(const lab::UpsampleNearest2xParams params) {
  const float* __restrict__ in = params.in.data;
  float* __restrict__ out = params.out.data;
  const long long in_bs = params.in.batch_stride, in_cs = params.in.channel_stride;
  const long long out_bs = params.out.batch_stride, out_cs = params.out.channel_stride;
  const int h_in = params.h_in, w_in = params.w_in;
  const int w_out = 2 * w_in;
  const int p = blockIdx.x * blockDim.x + threadIdx.x;
  if (p >= 2 * h_in * w_out) return;
  const int c = blockIdx.y, b = blockIdx.z;
  const int y = p / w_out, x = p % w_out;
  out[b * out_bs + c * out_cs + p] = in[b * in_bs + c * in_cs + (y / 2) * w_in + x / 2];
}

#endif  // LAB_NN_UPSAMPLE_NEAREST2X_CU
