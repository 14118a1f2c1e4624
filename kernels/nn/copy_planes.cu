// copy_planes: copies C channel planes between two views, out[b, c, p] = in[b, c, p] (a Concat input whose
// producer could not write into the concat buffer in place).
//
// Layouts: in and out [B, C, plane] views (pointer, batch stride, channel stride; contiguous planes); out
// must not overlap in. Variant: copy_planes (v1_direct): one thread per element. Block 256, grid (ceil(plane
// / 256), C, B).
#ifndef LAB_NN_COPY_PLANES_CU
#define LAB_NN_COPY_PLANES_CU
#include "common/lab.cuh"
#include "nn/nn_common.cuh"
#include "nn/nn_params.cuh"

__global__ void __launch_bounds__(nn::kThreads) copy_planes(const lab::CopyPlanesParams params) {
  const float* __restrict__ in = params.in.data;
  float* __restrict__ out = params.out.data;
  const long long in_bs = params.in.batch_stride, in_cs = params.in.channel_stride;
  const long long out_bs = params.out.batch_stride, out_cs = params.out.channel_stride;
  const int plane = params.plane;
  const int p = blockIdx.x * blockDim.x + threadIdx.x;
  if (p >= plane) return;
  const int c = blockIdx.y, b = blockIdx.z;
  out[b * out_bs + c * out_cs + p] = in[b * in_bs + c * in_cs + p];
}

#endif  // LAB_NN_COPY_PLANES_CU
