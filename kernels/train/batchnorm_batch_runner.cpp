// Runner batchnorm_batch: a seeded [N, C, H*W] input (each channel with its own offset and spread), gamma,
// beta, running statistics and an upstream gradient; one launch of the statistics (with the momentum update
// of running statistics reset at every launch), the forward and the backward (into zeroed d gamma, d beta);
// against the float64 loops of batchnorm_batch_reference.
#include <cmath>

#include "kernels/runner.hpp"
#include "kernels/train/batchnorm_batch_op.hpp"
#include "kernels/train/batchnorm_batch_reference.hpp"
#include "kernels/train/batchnorm_runner_inputs.hpp"

namespace lab {
namespace {

constexpr double kEps = 1e-3, kMomentum = 0.03;  // Ultralytics' BatchNorm2d settings

std::vector<double> widened(const std::vector<float>& v) { return {v.begin(), v.end()}; }

class BatchNormBatchInstance : public InstanceBase {
 public:
  BatchNormBatchInstance(Backend& backend, const std::string&, const Params& p, uint64_t seed)
      : InstanceBase(backend), op_(backend) {
    layout_ = {int(param_int(p, "N")), int(param_int(p, "C")), param_int(p, "H") * param_int(p, "W")};
    silu_ = param_int(p, "SILU") == 1;
    const size_t n = layout_.size(), c = size_t(layout_.channels);
    BatchNormRunnerInputs in = batchnorm_runner_inputs(layout_, seed);
    x_ = std::move(in.x), dy_ = std::move(in.dy), gamma_ = std::move(in.gamma), beta_ = std::move(in.beta);
    running_mean_ = std::move(in.running_mean), running_var_ = std::move(in.running_var);
    x_d_ = backend.upload_vector(x_), dy_d_ = backend.upload_vector(dy_);
    gamma_d_ = backend.upload_vector(gamma_), beta_d_ = backend.upload_vector(beta_);
    running_mean_d_ = output_array<float>(c), running_var_d_ = output_array<float>(c);
    mean_d_ = output_array<float>(c), inv_std_d_ = output_array<float>(c);
    y_d_ = output_array<float>(n), dx_d_ = output_array<float>(n);
    d_gamma_d_ = output_array<float>(c), d_beta_d_ = output_array<float>(c);
    sum_dz_d_ = output_array<double>(c), sum_dz_xhat_d_ = output_array<double>(c);
  }

  void launch() override {
    const size_t c = size_t(layout_.channels);
    backend_.upload(running_mean_d_.get(), running_mean_.data(), c * sizeof(float));
    backend_.upload(running_var_d_.get(), running_var_.data(), c * sizeof(float));
    for (const DeviceBuffer* b : {&d_gamma_d_, &d_beta_d_}) backend_.fill_bytes(b->get(), 0, b->bytes());
    const float* x = x_d_.as<const float>();
    float *mean = mean_d_.as<float>(), *inv_std = inv_std_d_.as<float>();
    op_.statistics({x, mean, inv_std, running_mean_d_.as<float>(), running_var_d_.as<float>(), kEps, kMomentum,
                    layout_.batch, layout_.channels, layout_.plane});
    op_.apply({x, mean, inv_std, gamma_d_.as<const float>(), beta_d_.as<const float>(), y_d_.as<float>(),
               layout_.channels, silu_ ? 1 : 0, layout_.plane, (long long)layout_.size()});
    op_.backward({x, dy_d_.as<const float>(), mean, inv_std, gamma_d_.as<const float>(),
                  beta_d_.as<const float>(), sum_dz_d_.as<double>(), sum_dz_xhat_d_.as<double>(),
                  d_gamma_d_.as<float>(), d_beta_d_.as<float>(), dx_d_.as<float>(), layout_.batch,
                  layout_.channels, silu_ ? 1 : 0, layout_.plane});
  }

  std::vector<OutputCheck> check(const std::optional<Tolerance>& tol) override {
    const size_t n = layout_.size(), c = size_t(layout_.channels);
    const std::vector<double> x = widened(x_), gamma = widened(gamma_), beta = widened(beta_);
    const BatchStatistics stats = batch_statistics_reference(x, layout_);
    std::vector<double> inv_std(c), running_mean = widened(running_mean_), running_var = widened(running_var_);
    for (size_t k = 0; k < c; ++k) inv_std[k] = 1.0 / std::sqrt(stats.var[k] + kEps);
    running_statistics_update_reference(running_mean, running_var, stats, layout_.count(), kMomentum);
    const std::vector<double> y = batchnorm_forward_reference(x, layout_, gamma, beta, kEps, silu_);
    const BatchNormGradientsReference g =
        batchnorm_backward_reference(x, widened(dy_), layout_, gamma, beta, kEps, silu_);
    // Statistics and running statistics: float64 values rounded once to float32 (2^-24 relative; values
    // below ~4, inv_std below ~4): 1e-6 relative L2, 1e-6 absolute. y: float32 arithmetic on xhat =
    // (x - mean) inv_std, whose rounded mean moves xhat by up to 2^-24 |mean| inv_std (~2.4e-7 here), then
    // the affine and SiLU's expf: a few 1e-7 on values up to ~5: 1e-6 relative L2, 1e-5 absolute. dx: the
    // same error on O(1) terms that nearly cancel where a channel has few values (at two, xhat is +-1
    // whatever x, and dx comes only through eps): 1e-5 relative L2 (1.8e-6 measured with 1x1 maps at batch
    // 2), 1e-5 absolute. d gamma and d beta: float64 sums of M float32 terms with that error each, of both
    // signs, so a sum of a few units can carry a few 1e-6 relative (2.2e-6 measured for one channel of 3960
    // values): 1e-5 relative L2, 1e-5 * sqrt(M) absolute. A missing mean term, a biased/unbiased mix-up
    // (1 / (M - 1) of the variance) or a missing xhat term is off by far more.
    const Tolerance stat_t = tol.value_or(Tolerance{1e-6, 1e-6}), elem_t = tol.value_or(Tolerance{1e-6, 1e-5});
    const Tolerance dx_t = tol.value_or(Tolerance{1e-5, 1e-5});
    const Tolerance sum_t = tol.value_or(Tolerance{1e-5, 1e-5 * std::sqrt(layout_.count())});
    return {make_check("mean", {c}, fetch<float>(mean_d_, c), stats.mean, stat_t),
            make_check("inv_std", {c}, fetch<float>(inv_std_d_, c), inv_std, stat_t),
            make_check("running_mean", {c}, fetch<float>(running_mean_d_, c), running_mean, stat_t),
            make_check("running_var", {c}, fetch<float>(running_var_d_, c), running_var, stat_t),
            make_check("y", {n}, fetch<float>(y_d_, n), y, elem_t),
            make_check("d_gamma", {c}, fetch<float>(d_gamma_d_, c), g.d_gamma, sum_t),
            make_check("d_beta", {c}, fetch<float>(d_beta_d_, c), g.d_beta, sum_t),
            make_check("dx", {n}, fetch<float>(dx_d_, n), g.dx, dx_t)};
  }

  // float32 elements moved: the statistics read x twice, the forward reads x and writes y, the backward
  // reads x and dy for each of its two sums and for the input gradient, and writes dx (11 per element);
  // about 40 flops per element over the four kernels.
  WorkCounts work() const override {
    const double n = double(layout_.size());
    return {n * 4 * 11, n * 40};
  }

 private:
  BatchNormLayout layout_;
  bool silu_ = true;
  std::vector<float> x_, dy_, gamma_, beta_, running_mean_, running_var_;
  DeviceBuffer x_d_, dy_d_, gamma_d_, beta_d_, running_mean_d_, running_var_d_, mean_d_, inv_std_d_, y_d_, dx_d_,
      d_gamma_d_, d_beta_d_, sum_dz_d_, sum_dz_xhat_d_;
  BatchNormBatchOp op_;
};

const bool registered = register_runner(batchnorm_batch_spec(), make_instance<BatchNormBatchInstance>());

}  // namespace
}  // namespace lab
