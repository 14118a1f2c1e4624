// Parameters of the synchronised batch-statistics BatchNorm kernels (batchnorm_sync.cu), shared by the
// kernels and the host that launches them: plain data, passed by value. Data-parallel ranks each hold their
// own dense float32 [batch, channels, plane] slice of the batch; a channel's statistics are over all ranks'
// values (`count` of them): SyncBatchNorm. Each rank computes float32 partial sums of its slice, the caller
// sums them over the ranks in place (an all-reduce) between the launches, and the next launch reads the
// totals.
#pragma once

namespace lab {

// batchnorm_partial_sums, one block per channel, over this rank's (batch, plane) values in float64, rounded
// once: out[c] = sum x, or with centre_sum set, sum (x - centre_sum[c] / count)^2 (the squared deviations
// from the all-ranks mean).
struct BatchNormPartialSumsParams {
  const float* x;           // [batch, channels, plane]
  const float* centre_sum;  // [channels] the all-ranks sum of x, or null
  float* out;               // [channels]
  double count;             // values per channel over every rank
  int batch, channels;
  long long plane;
};

// batchnorm_sync_statistics, one thread per channel, from the all-ranks sums: mean = sum / count,
// inv_std = 1 / sqrt(squares / count + eps), and with running_mean set the momentum update of
// batchnorm_stats (the unbiased variance squares / (count - 1)).
struct BatchNormSyncStatsParams {
  const float* sum;      // [channels] all-ranks sum of x
  const float* squares;  // [channels] all-ranks sum of (x - mean)^2
  float* mean;           // [channels]
  float* inv_std;        // [channels]
  float* running_mean;   // [channels] updated in place, or null
  float* running_var;    // [channels]
  double eps, momentum, count;
  int channels;
};

// The backward with dz = dy silu'(z) (dy without SiLU), xhat = (x - mean) inv_std:
//   batchnorm_backward_partial_sums, one block per channel, over this rank's values: sums[c] = sum dz,
//     sums[channels + c] = sum dz xhat (float64, rounded once); d_gamma[c] += sum dz xhat and
//     d_beta[c] += sum dz of this rank (when not null: the ranks' parameter gradients are summed with the
//     others).
//   batchnorm_backward_input_sync, one thread per element of this rank, from the all-ranks sums:
//     dx = gamma inv_std (dz - sums[c] / count - xhat sums[channels + c] / count).
struct BatchNormSyncBackwardParams {
  const float* x;        // [batch, channels, plane] the forward's input
  const float* dy;       // [batch, channels, plane]
  const float* mean;     // [channels] the forward's all-ranks statistics
  const float* inv_std;  // [channels]
  const float* gamma;    // [channels]
  const float* beta;     // [channels]
  float* sums;           // [2 channels] partial sums, then (after the caller's all-reduce) the totals
  float* d_gamma;        // [channels] or null
  float* d_beta;         // [channels] or null
  float* dx;             // [batch, channels, plane]
  double count;          // values per channel over every rank
  int batch, channels, silu;
  long long plane;
};

}  // namespace lab
