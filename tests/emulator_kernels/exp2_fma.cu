// Emulator test kernel: the attention softmax's FMA-pipe exponential (kernels/attention/exp2_fma.cuh) alone.
// exp2_fma_values: out[i] = exp2_fma(in[i]) for i < n; any launch shape.
#include "../../kernels/common/lab.cuh"
#include "../../kernels/attention/exp2_fma.cuh"

__global__ void exp2_fma_values(const float* in, int n, float* out) {
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) out[i] = exp2_fma(in[i]);
}
