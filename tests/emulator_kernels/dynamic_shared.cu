// Emulator test kernel: dynamic shared memory larger than the 48 KiB default.
//
// reverse_through_shared: in [gridDim.x, count] floats -> out [gridDim.x, count], each block's row reversed
//   through a tile of `count` floats in dynamic shared memory (LAB_DYNAMIC_SHARED; launch with count * 4
//   bytes).
// Grid: rows; block: any size (strided loops).
#include "../../kernels/common/lab.cuh"

extern "C" __global__ void reverse_through_shared(const float* __restrict__ in, float* __restrict__ out,
                                                  int count) {
  LAB_DYNAMIC_SHARED(float, tile);
  const float* src = in + size_t(blockIdx.x) * count;
  float* dst = out + size_t(blockIdx.x) * count;
  for (int i = threadIdx.x; i < count; i += blockDim.x) tile[i] = src[i];
  __syncthreads();
  for (int i = threadIdx.x; i < count; i += blockDim.x) dst[i] = tile[count - 1 - i];
}
