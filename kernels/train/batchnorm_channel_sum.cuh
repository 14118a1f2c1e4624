// Device helpers of the batch-statistics BatchNorm kernels (batchnorm_batch.cu, batchnorm_sync.cu): the
// fixed-order float64 sum over one channel of a dense [batch, channels, plane] tensor, dz from dy through the
// SiLU, and the backward's two per-channel sums and input gradient on a params struct P with the fields x,
// dy, mean, inv_std, gamma, beta, silu, batch, channels, plane. Include after common/lab.cuh,
// common/lab_block_sum.cuh and the params header.
#pragma once
#include "nn/nn_common.cuh"

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
  return silu ? nn::silu_grad(dy, z) : dy;
}

// sum dz and sum dz xhat over channel c (one block; every thread gets both).
struct BatchNormDzSums {
  double dz, dz_xhat;
};
template <typename P>
__device__ __forceinline__ BatchNormDzSums batchnorm_dz_sums(const P& p, int c) {
  const float mean = p.mean[c], inv_std = p.inv_std[c], gamma = p.gamma[c], beta = p.beta[c];
  const auto dz_at = [&](long long i, float xhat) {
    return batchnorm_grad_z(p.dy[i], gamma * xhat + beta, p.silu);
  };
  const double sum_dz = channel_sum(p.batch, p.channels, p.plane, c,
                                    [&](long long i) { return double(dz_at(i, (p.x[i] - mean) * inv_std)); });
  const double sum_dz_xhat = channel_sum(p.batch, p.channels, p.plane, c, [&](long long i) {
    const float xhat = (p.x[i] - mean) * inv_std;
    return double(dz_at(i, xhat)) * double(xhat);
  });
  return {sum_dz, sum_dz_xhat};
}

// dx of element i (channel c) from the channel's sums (sum_dz[c], sum_dz_xhat[c], float or double) over
// m = values() values: gamma inv_std (dz - sum_dz / m - xhat sum_dz_xhat / m).
template <typename P, typename S, typename M>
__device__ __forceinline__ float batchnorm_input_grad(const P& p, long long i, int c, const S* sum_dz,
                                                      const S* sum_dz_xhat, M values) {
  const float inv_std = p.inv_std[c], gamma = p.gamma[c];
  const float xhat = (p.x[i] - p.mean[c]) * inv_std;
  const double dz = batchnorm_grad_z(p.dy[i], gamma * xhat + p.beta[c], p.silu);
  const double m = values();
  return float(double(gamma) * double(inv_std) *
               (dz - double(sum_dz[c]) / m - double(xhat) * double(sum_dz_xhat[c]) / m));
}
