// maxpool2d: max_pool2d with stride 1 and padding K/2 (K odd), padding as -inf like PyTorch: the maximum over
// the window's positions inside the plane. SPPF chains three K = 5 pools, each writing its concat slice.
//
// Layouts: in and out [B, C, H, W] views (pointer, batch stride, channel stride; contiguous H*W planes); the
// output has the input's size. out must not overlap in. A NaN in the window gives NaN, as in PyTorch.
// Variant: maxpool2d (v1_direct): one thread per output element, reading its K x K window through the cache.
// Block 256, grid (ceil(H*W / 256), C, B).
#ifndef LAB_NN_MAXPOOL2D_CU
#define LAB_NN_MAXPOOL2D_CU
#include "common/lab.cuh"
#include "nn/nn_common.cuh"
#include "nn/nn_params.cuh"

__global__ void __launch_bounds__(nn::kThreads) maxpool2d(const lab::MaxPool2dParams params) {
  const float* __restrict__ in = params.in.data;
  float* __restrict__ out = params.out.data;
  const long long in_bs = params.in.batch_stride, in_cs = params.in.channel_stride;
  const long long out_bs = params.out.batch_stride, out_cs = params.out.channel_stride;
  const int h = params.h, w = params.w, kernel = params.kernel;
  const int p = blockIdx.x * blockDim.x + threadIdx.x;
  if (p >= h * w) return;
  const int c = blockIdx.y, b = blockIdx.z;
  const int y = p / w, x = p % w, r = kernel / 2;
  const int y0 = max(y - r, 0), y1 = min(y + r, h - 1), x0 = max(x - r, 0), x1 = min(x + r, w - 1);
  const float* src = in + b * in_bs + c * in_cs;
  float m = src[p];
  for (int iy = y0; iy <= y1; ++iy)
    for (int ix = x0; ix <= x1; ++ix) {
      const float v = src[iy * w + ix];
      if (v > m || v != v) m = v;
    }
  out[b * out_bs + c * out_cs + p] = m;
}

#endif  // LAB_NN_MAXPOOL2D_CU
