// Batch-statistics BatchNorm on the device (batchnorm_batch.cu): the per-channel statistics with the running
// statistics' update, the normalise + affine (+ SiLU) forward, and its backward (per-channel sums, then the
// input gradient). The caller fills the parameter structs (batchnorm_batch_params.cuh); the op picks grids.
#pragma once
#include "kernels/compiled_kernel.hpp"
#include "kernels/train/batchnorm_batch_params.cuh"

namespace lab {

// Spec batchnorm_batch (family train): entries batchnorm_stats, batchnorm_apply, batchnorm_backward_reduce,
// batchnorm_backward_input; parameters N, C, H, W, SILU of the runner.
const KernelSpec& batchnorm_batch_spec();

// UsageError (one line naming `where`) unless every channel has at least two values (batch * plane >= 2):
// one value has no variance to normalise by, as PyTorch's "Expected more than 1 value per channel".
void require_batch_statistics(int batch, long long plane, const char* where);

// The launch shapes of the batch-statistics BatchNorm kernels (batchnorm_batch.cu, batchnorm_sync.cu): one
// block of kBatchNormThreads per channel, or one thread per element (or channel).
LaunchConfig batchnorm_per_channel(int channels);
LaunchConfig batchnorm_per_element(long long count);

class BatchNormBatchOp {
 public:
  explicit BatchNormBatchOp(Backend& backend);
  // mean, inv_std (and the running statistics when p.running_mean is set) of every channel.
  void statistics(const BatchNormStatsParams& p) const;
  // y = act(gamma (x - mean) inv_std + beta).
  void apply(const BatchNormApplyParams& p) const;
  // d gamma, d beta (added) and dx from dy; p.sum_dz / p.sum_dz_xhat are [channels] device scratch.
  void backward(const BatchNormBackwardParams& p) const;

 private:
  CompiledKernel stats_, apply_, reduce_, input_;
};

}  // namespace lab
