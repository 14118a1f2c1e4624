// The batchnorm_batch spec, the shape check and the four launches.
#include "kernels/train/batchnorm_batch_op.hpp"

#include <string>

#include "nvrtc_runtime/errors.hpp"

namespace lab {
LaunchConfig batchnorm_per_channel(int channels) {
  return {{unsigned(channels), 1, 1}, {unsigned(kBatchNormThreads), 1, 1}};
}

LaunchConfig batchnorm_per_element(long long count) {
  return {{unsigned((count + kBatchNormThreads - 1) / kBatchNormThreads), 1, 1},
          {unsigned(kBatchNormThreads), 1, 1}};
}

const KernelSpec& batchnorm_batch_spec() {
  using K = ParamSpec::Kind;
  static const KernelSpec spec{
      .name = "batchnorm_batch",
      .family = "train",
      .description =
          "batch-statistics BatchNorm of training from scratch: per-channel statistics with the running "
          "update, normalise + affine (+ SiLU), and its backward",
      .source = "train/batchnorm_batch.cu",
      .variants = {{"v1_channel", "one block per channel for the float64 fixed-order sums, one thread per "
                                  "element for the rest"}},
      .params = {{"N", K::Int, "4", "batch", 1, 4096},
                 {"C", K::Int, "24", "channels", 1, 4096},
                 {"H", K::Int, "13", "height", 1, 4096},
                 {"W", K::Int, "11", "width", 1, 4096},
                 {"SILU", K::Int, "1", "1: SiLU after the affine, 0: identity", 0, 1}},
      .entries = {"batchnorm_stats", "batchnorm_apply", "batchnorm_backward_reduce",
                  "batchnorm_backward_input"},
      .validate =
          [](const Params& p) {
            require_batch_statistics(int(param_int(p, "N")), param_int(p, "H") * param_int(p, "W"),
                                     "batchnorm_batch");
          }};
  return spec;
}

void require_batch_statistics(int batch, long long plane, const char* where) {
  if ((long long)batch * plane < 2)
    throw UsageError(std::string(where) + ": batch-statistics BatchNorm needs at least two values per channel (batch " +
                     std::to_string(batch) + " x " + std::to_string(plane) + " positions)");
}

BatchNormBatchOp::BatchNormBatchOp(Backend& backend)
    : stats_(backend, batchnorm_batch_spec(), "v1_channel", "batchnorm_stats"),
      apply_(backend, batchnorm_batch_spec(), "v1_channel", "batchnorm_apply"),
      reduce_(backend, batchnorm_batch_spec(), "v1_channel", "batchnorm_backward_reduce"),
      input_(backend, batchnorm_batch_spec(), "v1_channel", "batchnorm_backward_input") {}

void BatchNormBatchOp::statistics(const BatchNormStatsParams& p) const {
  require_batch_statistics(p.batch, p.plane, "batchnorm_stats");
  stats_.launch(batchnorm_per_channel(p.channels), p);
}

void BatchNormBatchOp::apply(const BatchNormApplyParams& p) const {
  apply_.launch(batchnorm_per_element(p.count), p);
}

void BatchNormBatchOp::backward(const BatchNormBackwardParams& p) const {
  require_batch_statistics(p.batch, p.plane, "batchnorm_backward");
  reduce_.launch(batchnorm_per_channel(p.channels), p);
  input_.launch(batchnorm_per_element((long long)p.batch * p.channels * p.plane), p);
}

}  // namespace lab
