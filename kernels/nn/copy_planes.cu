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

extern "C" __global__ void __launch_bounds__(nn::kThreads)
    copy_planes(const float* __restrict__ in, long long in_bs, long long in_cs, float* __restrict__ out,
                long long out_bs, long long out_cs, int plane) {
  const int p = blockIdx.x * blockDim.x + threadIdx.x;
  if (p >= plane) return;
  const int c = blockIdx.y, b = blockIdx.z;
  out[b * out_bs + c * out_cs + p] = in[b * in_bs + c * in_cs + p];
}

#endif  // LAB_NN_COPY_PLANES_CU
