// Runner batchnorm_sync: one rank of a SyncBatchNorm over R ranks of N images each. The whole batch, a seeded
// [R N, C, H*W] input (each channel with its own offset and spread) and upstream gradient, is split into the
// ranks' slices; this backend runs rank 0's slice through BatchNormSyncOp (the statistics with the momentum
// update of running statistics reset at every launch, then the backward into zeroed d gamma, d beta). Its
// all-reduces add the other ranks' float32 partial sums, computed on the host from their slices as their
// launches would give them (a float64 sum over the slice, rounded once), to this rank's in rank order, as
// ThreadCommunicator does. Checked against the float64 loops of batchnorm_batch_reference over the whole
// batch: rank 0's statistics, running statistics and dx are the whole batch's, its d gamma and d beta the
// whole batch's gradients of its own slice (the ranks' parameter gradients are summed later).
#include <array>
#include <cmath>
#include <optional>

#include "kernels/runner.hpp"
#include "kernels/train/batchnorm_batch_reference.hpp"
#include "kernels/train/batchnorm_runner_inputs.hpp"
#include "kernels/train/batchnorm_sync_op.hpp"

namespace lab {
namespace {

constexpr double kEps = 1e-3, kMomentum = 0.03;  // Ultralytics' BatchNorm2d settings

std::vector<double> widened(const std::vector<float>& v) { return {v.begin(), v.end()}; }

class BatchNormSyncInstance : public InstanceBase {
 public:
  BatchNormSyncInstance(Backend& backend, const std::string&, const Params& p, uint64_t seed)
      : InstanceBase(backend), op_(backend) {
    ranks_ = int(param_int(p, "R"));
    slice_ = {int(param_int(p, "N")), int(param_int(p, "C")), param_int(p, "H") * param_int(p, "W")};
    whole_ = {ranks_ * slice_.batch, slice_.channels, slice_.plane};
    silu_ = param_int(p, "SILU") == 1;
    const size_t c = size_t(whole_.channels), mine = slice_.size();
    BatchNormRunnerInputs in = batchnorm_runner_inputs(whole_, seed);
    x_ = std::move(in.x), dy_ = std::move(in.dy), gamma_ = std::move(in.gamma), beta_ = std::move(in.beta);
    running_mean_ = std::move(in.running_mean), running_var_ = std::move(in.running_var);
    x_d_ = backend.upload_vector(std::vector<float>(x_.begin(), x_.begin() + long(mine)));
    dy_d_ = backend.upload_vector(std::vector<float>(dy_.begin(), dy_.begin() + long(mine)));
    gamma_d_ = backend.upload_vector(gamma_), beta_d_ = backend.upload_vector(beta_);
    running_mean_d_ = output_array<float>(c), running_var_d_ = output_array<float>(c);
    mean_d_ = output_array<float>(c), inv_std_d_ = output_array<float>(c);
    dx_d_ = output_array<float>(mine);
    d_gamma_d_ = output_array<float>(c), d_beta_d_ = output_array<float>(c);
    sums_d_ = output_array<float>(2 * c);
  }

  void launch() override {
    const size_t c = size_t(whole_.channels);
    backend_.upload(running_mean_d_.get(), running_mean_.data(), c * sizeof(float));
    backend_.upload(running_var_d_.get(), running_var_.data(), c * sizeof(float));
    for (const DeviceBuffer* b : {&d_gamma_d_, &d_beta_d_}) backend_.fill_bytes(b->get(), 0, b->bytes());
    const float* x = x_d_.as<const float>();
    float *mean = mean_d_.as<float>(), *inv_std = inv_std_d_.as<float>();
    int exchange = 0;  // which of the three all-reduces: the peers' sums depend on the earlier ones' results
    const ChannelAllReduce all_reduce = [&](float* data, size_t count) { add_peers(data, count, exchange++); };
    op_.statistics({x, mean, inv_std, running_mean_d_.as<float>(), running_var_d_.as<float>(), kEps, kMomentum,
                    slice_.batch, slice_.channels, slice_.plane},
                   sums_d_.as<float>(), ranks_, all_reduce);
    op_.backward({x, dy_d_.as<const float>(), mean, inv_std, gamma_d_.as<const float>(),
                  beta_d_.as<const float>(), nullptr, nullptr, d_gamma_d_.as<float>(), d_beta_d_.as<float>(),
                  dx_d_.as<float>(), slice_.batch, slice_.channels, silu_ ? 1 : 0, slice_.plane},
                 sums_d_.as<float>(), ranks_, all_reduce);
  }

  std::vector<OutputCheck> check(const std::optional<Tolerance>& tol) override {
    const size_t c = size_t(whole_.channels), mine = slice_.size();
    const std::vector<double> x = widened(x_), gamma = widened(gamma_), beta = widened(beta_);
    const BatchStatistics stats = batch_statistics_reference(x, whole_);
    std::vector<double> inv_std(c), running_mean = widened(running_mean_), running_var = widened(running_var_);
    for (size_t k = 0; k < c; ++k) inv_std[k] = 1.0 / std::sqrt(stats.var[k] + kEps);
    running_statistics_update_reference(running_mean, running_var, stats, whole_.count(), kMomentum);
    std::vector<double> dy = widened(dy_);
    const BatchNormGradientsReference whole = batchnorm_backward_reference(x, dy, whole_, gamma, beta, kEps, silu_);
    // d gamma, d beta of rank 0's slice alone: the whole batch's statistics, the other slices' dy zero.
    std::fill(dy.begin() + long(mine), dy.end(), 0.0);
    const BatchNormGradientsReference own = batchnorm_backward_reference(x, dy, whole_, gamma, beta, kEps, silu_);
    // batchnorm_batch's bounds (batchnorm_batch_runner.cpp): one float32 rounding of float64 values for the
    // statistics, float32 arithmetic on xhat for dx with cancellation where a channel has few values, float64
    // sums of float32 terms for d gamma, d beta. The ranks add each partial sum rounded to float32 (2^-24
    // relative each, R of them): the mean and variance move by R 2^-24 of the channel's sum of |x| / count
    // (values below ~4: 2.4e-7 per rank), under the statistics' 1e-6 up to the 4 ranks the cases use; dx and
    // the sums carry that through xhat, under their 1e-5. A peer's sums left out, the count of one rank or a
    // variance about the rank's own mean are off by far more (the cases' slices have their own offsets).
    const Tolerance stat_t = tol.value_or(Tolerance{1e-6, 1e-6}), dx_t = tol.value_or(Tolerance{1e-5, 1e-5});
    const Tolerance sum_t = tol.value_or(Tolerance{1e-5, 1e-5 * std::sqrt(slice_.count())});
    return {make_check("mean", {c}, fetch<float>(mean_d_, c), stats.mean, stat_t),
            make_check("inv_std", {c}, fetch<float>(inv_std_d_, c), inv_std, stat_t),
            make_check("running_mean", {c}, fetch<float>(running_mean_d_, c), running_mean, stat_t),
            make_check("running_var", {c}, fetch<float>(running_var_d_, c), running_var, stat_t),
            make_check("d_gamma", {c}, fetch<float>(d_gamma_d_, c), own.d_gamma, sum_t),
            make_check("d_beta", {c}, fetch<float>(d_beta_d_, c), own.d_beta, sum_t),
            make_check("dx", {mine}, fetch<float>(dx_d_, mine),
                       std::vector<double>(whole.dx.begin(), whole.dx.begin() + long(mine)), dx_t)};
  }

  // float32 elements of this rank moved: the two partial sums read x twice, the backward's sums read x and
  // dy, the input gradient reads x and dy and writes dx (7 per element); about 30 flops per element. The
  // three all-reduces' host round trips (C or 2 C floats each; the peers' sums computed at the first launch)
  // are timed but not counted.
  WorkCounts work() const override {
    const double n = double(slice_.size());
    return {n * 4 * 7, n * 30};
  }

 private:
  // The all-reduce of exchange 0 (sum x), 1 (sum of squared deviations from the all-ranks mean) or 2 (sum dz,
  // sum dz xhat): this rank's partial sums (`data`, on the device) plus the peers', in rank order.
  void add_peers(float* data, size_t count, int exchange) {
    std::vector<float> total(count);
    backend_.download(total.data(), data, count * sizeof(float));
    const size_t c = size_t(whole_.channels);
    std::vector<double> mean(c), inv_std(c);  // exchange 1: the all-ranks mean; 2: the statistics written
    if (exchange == 1) {
      for (size_t k = 0; k < c; ++k) mean[k] = double(channel_sums_[k]) / whole_.count();
    } else if (exchange == 2) {
      mean = widened(backend_.download_vector<float>(mean_d_, c));
      inv_std = widened(backend_.download_vector<float>(inv_std_d_, c));
    }
    std::optional<PeerSums>& peers = peers_[size_t(exchange)];
    if (!peers || peers->mean != mean || peers->inv_std != inv_std) {
      peers = PeerSums{mean, inv_std, {}};
      for (int rank = 1; rank < ranks_; ++rank) peers->sums.push_back(peer_sums(rank, exchange, mean, inv_std));
    }
    for (const std::vector<float>& peer : peers->sums)
      for (size_t i = 0; i < count; ++i) total[i] += peer[i];
    if (exchange == 0) channel_sums_ = total;
    backend_.upload(data, total.data(), count * sizeof(float));
  }

  // Rank `rank`'s partial sums of `exchange` over its slice, float64 rounded once per channel.
  std::vector<float> peer_sums(int rank, int exchange, const std::vector<double>& mean,
                               const std::vector<double>& inv_std) const {
    const size_t c = size_t(whole_.channels);
    std::vector<double> first(c), second(c);
    for (int b = rank * slice_.batch; b < (rank + 1) * slice_.batch; ++b)
      for (size_t k = 0; k < c; ++k)
        for (long long q = 0; q < whole_.plane; ++q) {
          const size_t i = whole_.index(b, int(k), q);
          const double v = x_[i];
          if (exchange == 0) {
            first[k] += v;
          } else if (exchange == 1) {
            first[k] += (v - mean[k]) * (v - mean[k]);
          } else {
            const double xhat = (v - mean[k]) * inv_std[k], z = gamma_[k] * xhat + beta_[k];
            const double s = 1.0 / (1.0 + std::exp(-z));
            const double dz = silu_ ? dy_[i] * s * (1.0 + z * (1.0 - s)) : dy_[i];
            first[k] += dz, second[k] += dz * xhat;
          }
        }
    std::vector<float> out(first.begin(), first.end());
    if (exchange == 2) out.insert(out.end(), second.begin(), second.end());
    return out;
  }

  int ranks_ = 1;
  BatchNormLayout slice_, whole_;  // rank 0's images; every rank's
  bool silu_ = true;
  std::vector<float> x_, dy_, gamma_, beta_, running_mean_, running_var_;  // the whole batch
  std::vector<float> channel_sums_;  // exchange 0's all-ranks sums: the centre of exchange 1
  // Each exchange's peer sums (ranks 1 .. R-1) with the statistics they were computed from: the kernels are
  // deterministic, so a later launch (lab bench) meets the same statistics and adds the sums kept.
  struct PeerSums {
    std::vector<double> mean, inv_std;
    std::vector<std::vector<float>> sums;
  };
  std::array<std::optional<PeerSums>, 3> peers_;
  DeviceBuffer x_d_, dy_d_, gamma_d_, beta_d_, running_mean_d_, running_var_d_, mean_d_, inv_std_d_, dx_d_,
      d_gamma_d_, d_beta_d_, sums_d_;
  BatchNormSyncOp op_;
};

const bool registered = register_runner(batchnorm_sync_spec(), make_instance<BatchNormSyncInstance>());

}  // namespace
}  // namespace lab
