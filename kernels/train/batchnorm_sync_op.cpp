// The batchnorm_sync spec and the launches around the caller's all-reduces.
#include "kernels/train/batchnorm_sync_op.hpp"

#include "kernels/train/batchnorm_batch_op.hpp"

namespace lab {
const KernelSpec& batchnorm_sync_spec() {
  using K = ParamSpec::Kind;
  static const KernelSpec spec{
      .name = "batchnorm_sync",
      .family = "train",
      .description =
          "synchronised batch-statistics BatchNorm on one data-parallel rank: per-channel partial "
          "sums around the caller's all-reduces, the statistics and the input gradient from the "
          "all-ranks sums",
      .source = "train/batchnorm_sync.cu",
      .variants = {{"v1_channel",
                    "one block per channel for the float64 fixed-order sums, one thread per "
                    "channel or element for the rest"}},
      .params = {{"R", K::Int, "2", "ranks (the runner runs rank 0, the others' sums emulated)", 1, 64},
                 {"N", K::Int, "2", "batch of each rank", 1, 4096},
                 {"C", K::Int, "24", "channels", 1, 4096},
                 {"H", K::Int, "13", "height", 1, 4096},
                 {"W", K::Int, "11", "width", 1, 4096},
                 {"SILU", K::Int, "1", "1: SiLU after the affine, 0: identity", 0, 1}},
      .entries = {"batchnorm_partial_sums", "batchnorm_sync_statistics", "batchnorm_backward_partial_sums",
                  "batchnorm_backward_input_sync"},
      .validate =
          [](const Params& p) {
            require_batch_statistics(int(param_int(p, "R") * param_int(p, "N")),
                                     param_int(p, "H") * param_int(p, "W"), "batchnorm_sync");
          }};
  return spec;
}

BatchNormSyncOp::BatchNormSyncOp(Backend& backend)
    : partial_(backend, batchnorm_sync_spec(), "v1_channel", "batchnorm_partial_sums"),
      stats_(backend, batchnorm_sync_spec(), "v1_channel", "batchnorm_sync_statistics"),
      backward_partial_(backend, batchnorm_sync_spec(), "v1_channel", "batchnorm_backward_partial_sums"),
      input_(backend, batchnorm_sync_spec(), "v1_channel", "batchnorm_backward_input_sync") {}

void BatchNormSyncOp::statistics(const BatchNormStatsParams& p, float* sums, int ranks,
                                 const ChannelAllReduce& all_reduce) const {
  require_batch_statistics(p.batch * ranks, p.plane, "batchnorm_sync_statistics");
  const double count = double(ranks) * double(p.batch) * double(p.plane);
  float* squares = sums + p.channels;
  BatchNormPartialSumsParams partial{p.x, nullptr, sums, count, p.batch, p.channels, p.plane};
  partial_.launch(batchnorm_per_channel(p.channels), partial);
  all_reduce(sums, size_t(p.channels));
  partial.centre_sum = sums, partial.out = squares;
  partial_.launch(batchnorm_per_channel(p.channels), partial);
  all_reduce(squares, size_t(p.channels));
  const BatchNormSyncStatsParams stats{sums,          squares, p.mean,     p.inv_std, p.running_mean,
                                       p.running_var, p.eps,   p.momentum, count,     p.channels};
  stats_.launch(batchnorm_per_element(p.channels), stats);
}

void BatchNormSyncOp::backward(const BatchNormBackwardParams& p, float* sums, int ranks,
                               const ChannelAllReduce& all_reduce) const {
  require_batch_statistics(p.batch * ranks, p.plane, "batchnorm_sync_backward");
  BatchNormSyncBackwardParams s{};
  s.x = p.x, s.dy = p.dy, s.mean = p.mean, s.inv_std = p.inv_std, s.gamma = p.gamma, s.beta = p.beta;
  s.sums = sums, s.d_gamma = p.d_gamma, s.d_beta = p.d_beta, s.dx = p.dx;
  s.count = double(ranks) * double(p.batch) * double(p.plane);
  s.batch = p.batch, s.channels = p.channels, s.silu = p.silu, s.plane = p.plane;
  backward_partial_.launch(batchnorm_per_channel(p.channels), s);
  all_reduce(sums, 2 * size_t(p.channels));
  input_.launch(batchnorm_per_element((long long)p.batch * p.channels * p.plane), s);
}

}  // namespace lab
