// Synchronised batch-statistics BatchNorm (SyncBatchNorm) on one data-parallel rank (batchnorm_sync.cu):
// the statistics and the backward's per-channel sums over every rank's slice of the batch, each rank's
// float32 partial sums added over the ranks by the caller's all-reduce between the launches. The
// normalisation itself is BatchNormBatchOp::apply with the statistics this op writes.
#pragma once
#include <cstddef>
#include <functional>

#include "kernels/compiled_kernel.hpp"
#include "kernels/train/batchnorm_batch_params.cuh"
#include "kernels/train/batchnorm_sync_params.cuh"

namespace lab {

// Sums `count` device floats over every rank in place, ordered after the work already issued on the backend.
using ChannelAllReduce = std::function<void(float* device_data, size_t count)>;

// Spec batchnorm_sync (family train): entries batchnorm_partial_sums, batchnorm_sync_statistics,
// batchnorm_backward_partial_sums, batchnorm_backward_input_sync.
const KernelSpec& batchnorm_sync_spec();

class BatchNormSyncOp {
 public:
  explicit BatchNormSyncOp(Backend& backend);
  // batchnorm_stats' outputs (p.mean, p.inv_std, the running update when p.running_mean is set) over `ranks`
  // ranks of p.batch images each: two all-reduces of p.channels floats (the sums, then the squared
  // deviations from the all-ranks mean). `sums`: [2 p.channels] device floats of scratch.
  void statistics(const BatchNormStatsParams& p, float* sums, int ranks,
                  const ChannelAllReduce& all_reduce) const;
  // BatchNormBatchOp::backward over `ranks` ranks: d gamma, d beta of this rank's values (added; the ranks'
  // parameter gradients are summed afterwards like every other), dx from the all-ranks sums (one all-reduce
  // of 2 p.channels floats into `sums`; p.sum_dz / p.sum_dz_xhat are not used).
  void backward(const BatchNormBackwardParams& p, float* sums, int ranks,
                const ChannelAllReduce& all_reduce) const;

 private:
  CompiledKernel partial_, stats_, backward_partial_, input_;
};

}  // namespace lab
