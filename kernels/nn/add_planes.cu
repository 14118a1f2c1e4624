// add_planes: gradient accumulation into a channel slice, dst[b, c, p] (+)= src[b, c, p]: the residual
// branches (the shortcut's gradient added to the branch's), the split / concat of C3k2, C3k, C2PSA, SPPF and
// the network's Concat layers (a slice of the concat's gradient added to, or starting, its producer's).
// accumulate = 1 adds, 0 overwrites (a plane copy: the first contribution, so no memset is needed).
//
// Layouts: src and dst [B, C, plane] views (pointer, batch stride, channel stride; contiguous planes); dst
// must not overlap src. Variant: add_planes (v1_direct): one thread per element. Block 256, grid
// (ceil(plane / 256), C, B).
#ifndef LAB_NN_ADD_PLANES_CU
#define LAB_NN_ADD_PLANES_CU
#include "common/lab.cuh"
#include "nn/gradient_store.cuh"
#include "nn/nn_common.cuh"
#include "nn/nn_params.cuh"
#include "nn/plane_backward_params.cuh"

__global__ void __launch_bounds__(nn::kThreads) add_planes(const lab::AddPlanesParams params) {
  const int p = blockIdx.x * blockDim.x + threadIdx.x;
  if (p >= params.plane) return;
  const int c = blockIdx.y, b = blockIdx.z;
  const float v = params.src.data[b * params.src.batch_stride + c * params.src.channel_stride + p];
  nn::store_gradient(params.dst.data + b * params.dst.batch_stride + c * params.dst.channel_stride + p, v,
                     params.accumulate);
}

#endif  // LAB_NN_ADD_PLANES_CU
