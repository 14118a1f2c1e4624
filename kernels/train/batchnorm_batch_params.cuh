// Parameters of the batch-statistics BatchNorm kernels (batchnorm_batch.cu), shared by the kernels and the
// host that launches them: plain data, passed by value. Tensors are dense float32 [batch, channels, plane]
// (NCHW with plane = H * W); statistics are per channel over the batch * plane values of that channel.
// BatchNorm in train mode as PyTorch's BatchNorm2d: normalised with the batch's mean and biased variance,
// the running statistics updated with the unbiased variance.
#pragma once

namespace lab {

constexpr int kBatchNormThreads = 256;  // threads per block of every batchnorm_batch kernel

// batchnorm_stats, one block per channel: mean[c] and inv_std[c] = 1 / sqrt(var_biased[c] + eps), two
// fixed-order passes in float64 (the mean, then the squared deviations), each rounded once to float32. With
// running_mean not null: running_mean = (1 - momentum) running_mean + momentum mean and running_var =
// (1 - momentum) running_var + momentum var_biased * count / (count - 1), count = batch * plane >= 2.
struct BatchNormStatsParams {
  const float* x;       // [batch, channels, plane]
  float* mean;          // [channels]
  float* inv_std;       // [channels]
  float* running_mean;  // [channels] updated in place, or null (no update)
  float* running_var;   // [channels] updated in place with running_mean
  double eps, momentum;
  int batch, channels;
  long long plane;
};

// batchnorm_apply, one thread per element: y = act(gamma[c] * (x - mean[c]) * inv_std[c] + beta[c]), act
// SiLU (z / (1 + e^-z), the conv epilogue's formula) or the identity.
struct BatchNormApplyParams {
  const float* x;        // [batch, channels, plane]
  const float* mean;     // [channels] batchnorm_stats' outputs
  const float* inv_std;  // [channels]
  const float* gamma;    // [channels] bn.weight
  const float* beta;     // [channels] bn.bias
  float* y;              // [batch, channels, plane]
  int channels, silu;
  long long plane, count;  // count = batch * channels * plane
};

// The backward, given dy = d loss / d y, with xhat = (x - mean) inv_std, z = gamma xhat + beta and
// dz = dy * silu'(z) (dy without SiLU), sums over (batch, plane) of the channel, M = batch * plane:
//   batchnorm_backward_reduce, one block per channel: sum_dz[c] = sum dz, sum_dz_xhat[c] = sum dz xhat
//     (float64, fixed order); d_gamma[c] += sum_dz_xhat, d_beta[c] += sum_dz (when not null).
//   batchnorm_backward_input, one thread per element:
//     dx = gamma inv_std (dz - sum_dz / M - xhat sum_dz_xhat / M).
struct BatchNormBackwardParams {
  const float* x;        // [batch, channels, plane] the forward's input
  const float* dy;       // [batch, channels, plane]
  const float* mean;     // [channels] the forward's statistics
  const float* inv_std;  // [channels]
  const float* gamma;    // [channels]
  const float* beta;     // [channels]
  double* sum_dz;        // [channels] written by the reduce, read by the input kernel
  double* sum_dz_xhat;   // [channels]
  float* d_gamma;        // [channels] += d loss / d bn.weight, or null
  float* d_beta;         // [channels] += d loss / d bn.bias, or null
  float* dx;             // [batch, channels, plane] d loss / d x
  int batch, channels, silu;
  long long plane;
};

}  // namespace lab
