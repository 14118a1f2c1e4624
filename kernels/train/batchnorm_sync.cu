// Synchronised batch-statistics BatchNorm (SyncBatchNorm) on data-parallel ranks: the kernels of one rank
// around the caller's all-reduces of per-channel float32 sums (batchnorm_sync_params.cuh). The forward's
// normalisation and activation are batchnorm_batch.cu's batchnorm_apply; deterministic (no atomics,
// fixed-order float64 sums through lab_block_sum):
//   batchnorm_partial_sums           grid = channels: this rank's sum of x, or of (x - all-ranks mean)^2.
//   batchnorm_sync_statistics        one thread per channel: mean, 1 / sqrt(var + eps), the running update.
//   batchnorm_backward_partial_sums  grid = channels: this rank's sum dz and sum dz xhat (+ d gamma, d beta).
//   batchnorm_backward_input_sync    one thread per element: dx from the all-ranks sums.
#include "common/lab.cuh"
#include "common/lab_block_sum.cuh"
#include "train/batchnorm_batch_params.cuh"
#include "train/batchnorm_sync_params.cuh"
#include "train/batchnorm_channel_sum.cuh"

__global__ void __launch_bounds__(lab::kBatchNormThreads)
    batchnorm_partial_sums(const lab::BatchNormPartialSumsParams p) {
  const int c = int(blockIdx.x);
  double sum;
  if (p.centre_sum) {
    const double mean = double(p.centre_sum[c]) / p.count;
    sum = channel_sum(p.batch, p.channels, p.plane, c, [&](long long i) {
      const double d = double(p.x[i]) - mean;
      return d * d;
    });
  } else {
    sum = channel_sum(p.batch, p.channels, p.plane, c, [&](long long i) { return double(p.x[i]); });
  }
  if (threadIdx.x == 0) p.out[c] = float(sum);
}

__global__ void __launch_bounds__(lab::kBatchNormThreads)
    batchnorm_sync_statistics(const lab::BatchNormSyncStatsParams p) {
  const int c = int(blockIdx.x * blockDim.x + threadIdx.x);
  if (c >= p.channels) return;
  const double mean = double(p.sum[c]) / p.count, var = double(p.squares[c]) / p.count;
  p.mean[c] = float(mean);
  p.inv_std[c] = float(1.0 / sqrt(var + p.eps));
  if (p.running_mean) {
    const double m = p.momentum;
    p.running_mean[c] = float((1.0 - m) * double(p.running_mean[c]) + m * mean);
    p.running_var[c] = float((1.0 - m) * double(p.running_var[c]) + m * var * p.count / (p.count - 1.0));
  }
}

__global__ void __launch_bounds__(lab::kBatchNormThreads)
    batchnorm_backward_partial_sums(const lab::BatchNormSyncBackwardParams p) {
  const int c = int(blockIdx.x);
  const BatchNormDzSums sums = batchnorm_dz_sums(p, c);
  const double sum_dz = sums.dz, sum_dz_xhat = sums.dz_xhat;
  if (threadIdx.x != 0) return;
  p.sums[c] = float(sum_dz);
  p.sums[p.channels + c] = float(sum_dz_xhat);
  if (p.d_gamma) p.d_gamma[c] += float(sum_dz_xhat);
  if (p.d_beta) p.d_beta[c] += float(sum_dz);
}

__global__ void __launch_bounds__(lab::kBatchNormThreads)
    batchnorm_backward_input_sync(const lab::BatchNormSyncBackwardParams p) {
  const long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
  const long long count = (long long)p.batch * p.channels * p.plane;
  if (i >= count) return;
  const int c = int((i / p.plane) % p.channels);
  p.dx[i] = batchnorm_input_grad(p, i, c, p.sums, p.sums + p.channels, [&] { return p.count; });
}
