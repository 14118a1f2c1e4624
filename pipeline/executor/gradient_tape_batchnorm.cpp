// GradientTape's batch-statistics BatchNorm: the conv without bias or activation into u, the statistics (the
// running update with Ultralytics' momentum; over every rank when synchronised), the normalisation and
// activation (+ residual); backward: the BatchNorm backward down to du, then the conv's own backward.
#include <algorithm>

#include "nvrtc_runtime/errors.hpp"
#include "pipeline/executor/gradient_tape.hpp"
#include "pipeline/model/batchnorm_batch.hpp"

namespace lab {

std::unique_ptr<TapeBatchNorm> make_tape_batchnorm(Backend& backend, const ConvSpec& spec) {
  if (!spec.bn) throw RuntimeError("gradient tape: conv '" + spec.name + "' has no BatchNorm to normalise");
  const FrozenBatchNorm& bn = *spec.bn;
  auto t = std::make_unique<TapeBatchNorm>();
  t->unnormalised = unnormalised_conv(spec);
  t->gamma = backend.upload_vector(bn.gamma);
  t->beta = backend.upload_vector(bn.beta);
  std::vector<float> running = bn.mean;
  running.insert(running.end(), bn.var.begin(), bn.var.end());
  t->running = backend.upload_vector(running);
  t->running_mean = t->running.as<float>();
  t->running_var = t->running_mean + spec.c_out;
  const size_t channels = size_t(spec.c_out);
  t->mean = backend.alloc_array<float>(channels);
  t->inv_std = backend.alloc_array<float>(channels);
  t->d_gamma = backend.alloc_array<float>(channels);
  t->d_beta = backend.alloc_array<float>(channels);
  backend.fill_bytes(t->d_gamma.get(), 0, t->d_gamma.bytes());  // zero until a backward reaches the conv
  backend.fill_bytes(t->d_beta.get(), 0, t->d_beta.bytes());
  t->sums = backend.alloc_array<double>(2 * channels);  // room for 2 channels doubles or floats
  return t;
}

TapeTensor GradientTape::batchnorm_conv(TapeConv& c, const TapeTensor& x, const TapeTensor* residual) {
  const ConvSpec& spec = *c.spec;
  // Each rank's slice needs two values a channel (synchronised or not): named by the conv, at build time.
  require_batch_statistics(x.batch, int64_t(spec.out_size(x.height)) * spec.out_size(x.width),
                           spec.name.c_str());
  if (!batchnorm_) batchnorm_ = std::make_unique<BatchNormBatchOp>(backend_);
  // silu_residual and batchnorm_apply read and write plain pointers.
  const TapeTensor y = dense(make(x.batch, spec.c_out, spec.out_size(x.height), spec.out_size(x.width)));
  // u = conv(x), what the BatchNorm normalises (kept for its backward).
  const TapeTensor u = make(y.batch, y.channels, y.height, y.width, false);
  // With a residual, z = BatchNorm(u) and y = act(z) + residual; without, y = act(BatchNorm(u)) directly.
  const TapeTensor z = residual ? make(y.batch, y.channels, y.height, y.width, false) : y;
  const TapeTensor res = residual ? dense(*residual) : TapeTensor{};
  const TapeConv* conv = &c;
  const int silu = spec.silu ? 1 : 0;
  const double eps = spec.bn->eps;
  const LaneShared* lane = &building_lane();
  record(
      {x, res},
      [this, conv, x, y, u, z, res, silu, eps, lane] {
        conv->forward->run(x.batch, x.height, x.width, view(x), view(u), {},
                           lane->splitk_workspace.as<float>());
        TapeBatchNorm& bn = *conv->bn;
        BatchNormStatsParams stats{};
        stats.x = data(u), stats.mean = bn.mean.as<float>(), stats.inv_std = bn.inv_std.as<float>();
        stats.running_mean = bn.running_mean, stats.running_var = bn.running_var;
        stats.eps = eps, stats.momentum = kBatchNormMomentum;
        stats.batch = u.batch, stats.channels = u.channels, stats.plane = u.plane();
        if (sync_)
          batchnorm_sync_->statistics(stats, bn.sums.as<float>(), sync_->ranks, sync_->all_reduce_sum);
        else
          batchnorm_->statistics(stats);
        batchnorm_->apply({data(u), bn.mean.as<float>(), bn.inv_std.as<float>(), bn.gamma.as<float>(),
                           bn.beta.as<float>(), data(z), u.channels, res.id >= 0 ? 0 : silu, u.plane(),
                           (long long)u.count()});
        if (res.id >= 0) activation_.run((long long)y.count(), data(z), data(res), data(y), silu != 0);
      },
      [this, conv, x, y, u, res, silu] {
        if (!has_grad(y)) return;
        if (res.id >= 0) add_grad(res, grad_view(y), 0, res.channels);
        TapeBatchNorm& bn = *conv->bn;
        backend_.fill_bytes(bn.d_gamma.get(), 0, bn.d_gamma.bytes());  // the kernels add to them
        backend_.fill_bytes(bn.d_beta.get(), 0, bn.d_beta.bytes());
        float* du = scratch(u.count());
        double* sums = bn.sums.as<double>();
        BatchNormBackwardParams p{};
        p.x = data(u), p.dy = grad_view(y).data;
        p.mean = bn.mean.as<float>(), p.inv_std = bn.inv_std.as<float>();
        p.gamma = bn.gamma.as<float>(), p.beta = bn.beta.as<float>();
        p.sum_dz = sums, p.sum_dz_xhat = sums + u.channels;
        p.d_gamma = bn.d_gamma.as<float>(), p.d_beta = bn.d_beta.as<float>(), p.dx = du;
        p.batch = u.batch, p.channels = u.channels, p.silu = silu, p.plane = u.plane();
        if (sync_)
          batchnorm_sync_->backward(p, bn.sums.as<float>(), sync_->ranks, sync_->all_reduce_sum);
        else
          batchnorm_->backward(p);
        conv_backward(*conv, x, du);
      });
  return y;
}

std::map<std::string, GradientTape::RunningStatistics> GradientTape::running_statistics() const {
  std::map<std::string, RunningStatistics> out;
  for (const auto& c : convs_) {
    if (!c->bn) continue;
    const size_t channels = size_t(c->spec->c_out);
    RunningStatistics& r = out[c->spec->name];
    r.mean.resize(channels), r.var.resize(channels);
    backend_.download(r.mean.data(), c->bn->running_mean, channels * sizeof(float));
    backend_.download(r.var.data(), c->bn->running_var, channels * sizeof(float));
  }
  return out;
}

void GradientTape::synchronise_batch_statistics(BatchStatisticsSync sync) {
  if (!sync.all_reduce_sum || sync.ranks < 1)
    throw UsageError("gradient tape: synchronised batch statistics need an all-reduce and at least one rank");
  if (!batchnorm_sync_) batchnorm_sync_ = std::make_unique<BatchNormSyncOp>(backend_);
  sync_ = std::move(sync);
}

}  // namespace lab
