// Batch-statistics BatchNorm of training from scratch (BatchNorm2d in train mode) on dense float32
// [batch, channels, plane] tensors (batchnorm_batch_params.cuh), deterministic (no atomics, fixed-order
// float64 sums through lab_block_sum):
//   batchnorm_stats            grid = channels, block = kBatchNormThreads: the channel's mean and
//                              1 / sqrt(biased var + eps), and the running statistics' momentum update.
//   batchnorm_apply            one thread per element: y = act(gamma (x - mean) inv_std + beta).
//   batchnorm_backward_reduce  grid = channels: sum dz and sum dz * xhat of the channel, added to d gamma and
//                              d beta.
//   batchnorm_backward_input   one thread per element: dx from dz and the channel's two sums.
#include "common/lab.cuh"
#include "common/lab_block_sum.cuh"
#include "nn/nn_common.cuh"
#include "train/batchnorm_batch_params.cuh"
#include "train/batchnorm_channel_sum.cuh"

__global__ void __launch_bounds__(lab::kBatchNormThreads) batchnorm_stats(const lab::BatchNormStatsParams p) {
  const int c = int(blockIdx.x);
  const double count = double(p.batch) * double(p.plane);
  const double mean =
      channel_sum(p.batch, p.channels, p.plane, c, [&](long long i) { return double(p.x[i]); }) / count;
  const double var = channel_sum(p.batch, p.channels, p.plane, c, [&](long long i) {
                       const double d = double(p.x[i]) - mean;
                       return d * d;
                     }) / count;
  if (threadIdx.x != 0) return;
  p.mean[c] = float(mean);
  p.inv_std[c] = float(1.0 / sqrt(var + p.eps));
  if (p.running_mean) {
    const double m = p.momentum;
    p.running_mean[c] = float((1.0 - m) * double(p.running_mean[c]) + m * mean);
    p.running_var[c] = float((1.0 - m) * double(p.running_var[c]) + m * var * count / (count - 1.0));
  }
}

__global__ void __launch_bounds__(lab::kBatchNormThreads) batchnorm_apply(const lab::BatchNormApplyParams p) {
  const long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= p.count) return;
  const int c = int((i / p.plane) % p.channels);
  const float xhat = (p.x[i] - p.mean[c]) * p.inv_std[c];
  p.y[i] = nn::bias_act(p.gamma[c] * xhat, p.beta[c], p.silu);
}

__global__ void __launch_bounds__(lab::kBatchNormThreads)
    batchnorm_backward_reduce(const lab::BatchNormBackwardParams p) {
  const int c = int(blockIdx.x);
  const BatchNormDzSums sums = batchnorm_dz_sums(p, c);
  const double sum_dz = sums.dz, sum_dz_xhat = sums.dz_xhat;
  if (threadIdx.x != 0) return;
  p.sum_dz[c] = sum_dz;
  p.sum_dz_xhat[c] = sum_dz_xhat;
  if (p.d_gamma) p.d_gamma[c] += float(sum_dz_xhat);
  if (p.d_beta) p.d_beta[c] += float(sum_dz);
}

__global__ void __launch_bounds__(lab::kBatchNormThreads)
    batchnorm_backward_input(const lab::BatchNormBackwardParams p) {
  const long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
  const long long count = (long long)p.batch * p.channels * p.plane;
  if (i >= count) return;
  const int c = int((i / p.plane) % p.channels);
  p.dx[i] = batchnorm_input_grad(p, i, c, p.sum_dz, p.sum_dz_xhat,
                                 [&] { return double(p.batch) * double(p.plane); });
}
