// Device helpers of the batch-statistics BatchNorm kernels (batchnorm_batch.cu, batchnorm_sync.cu): the
// fixed-order float64 sum over one channel of a dense [batch, channels, plane] tensor, and dz from dy through
// the SiLU. Include after common/lab.cuh, common/lab_block_sum.cuh and the params header.
#pragma once

// Sum over (batch, plane) of channel c of f(element index), in float64, the same order on every run.
template <typename F>
__device__ __forceinline__ double channel_sum(int batch, int channels, long long plane, int c, F f) {
  double sum = 0.0;
  for (int b = 0; b < batch; ++b) {
    const long long base = ((long long)b * channels + c) * plane;
    for (long long i = threadIdx.x; i < plane; i += lab::kBatchNormThreads) sum += f(base + i);
  }
  return lab_block_sum<lab::kBatchNormThreads>(sum);
}

// dz from dy: dy * silu'(z), silu'(z) = s (1 + z (1 - s)), s = sigmoid(z) (dy without SiLU).
__device__ __forceinline__ float batchnorm_grad_z(float dy, float z, int silu) {
  if (!silu) return dy;
  const float s = 1.0f / (1.0f + expf(-z));
  return dy * (s * (1.0f + z * (1.0f - s)));
}
