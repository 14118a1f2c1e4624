// Batch-statistics BatchNorm (kernels/train/batchnorm_batch): the float64 reference's backward against
// central finite differences of its forward; the statistics and running update against hand-computed
// values; the kernels against the reference (several shapes, SiLU on and off, gradients added to earlier
// ones), and the one-line error where a channel has a single value. cpu emulator, [gpu] twin on cuda.
#include <catch2/catch.hpp>

#include <cmath>

#include "kernels/compare.hpp"
#include "kernels/train/batchnorm_batch_op.hpp"
#include "kernels/train/batchnorm_batch_reference.hpp"
#include "nvrtc_runtime/errors.hpp"
#include "tests/finite_difference.hpp"
#include "tests/test_helpers.hpp"

using namespace lab;

namespace {

constexpr double kEps = 1e-3, kMomentum = 0.03;

std::vector<double> seeded(size_t n, double lo, double hi, uint64_t seed) {
  const std::vector<float> v = random_uniform(n, float(lo), float(hi), seed);
  return {v.begin(), v.end()};
}

// Channel k's values spread around its own offset, so the mean matters.
std::vector<double> seeded_input(const BatchNormLayout& l, uint64_t seed) {
  std::vector<double> x = seeded(l.size(), -1.0, 1.0, seed);
  const std::vector<double> offset = seeded(size_t(l.channels), -1.0, 1.0, seed + 1);
  const std::vector<double> spread = seeded(size_t(l.channels), 0.5, 3.0, seed + 2);
  for (size_t i = 0; i < x.size(); ++i) {
    const size_t k = (i / size_t(l.plane)) % size_t(l.channels);
    x[i] = double(float(offset[k] + spread[k] * x[i]));  // float32 values: the kernels' input exactly
  }
  return x;
}

double weighted_output(const std::vector<double>& x, const std::vector<double>& dy, const BatchNormLayout& l,
                       const std::vector<double>& gamma, const std::vector<double>& beta, bool silu) {
  const std::vector<double> y = batchnorm_forward_reference(x, l, gamma, beta, kEps, silu);
  double sum = 0;
  for (size_t i = 0; i < y.size(); ++i) sum += dy[i] * y[i];
  return sum;
}

void check_reference_backward(bool silu) {
  const BatchNormLayout l{3, 4, 5};
  std::vector<double> x = seeded_input(l, 11), gamma = seeded(4, 0.2, 2.0, 12), beta = seeded(4, -1.0, 1.0, 13);
  const std::vector<double> dy = seeded(l.size(), -1.0, 1.0, 14);
  const auto loss = [&] { return weighted_output(x, dy, l, gamma, beta, silu); };
  const BatchNormGradientsReference g = batchnorm_backward_reference(x, dy, l, gamma, beta, kEps, silu);
  CHECK(test::finite_difference_error(x, g.dx, loss) < 1e-7);
  CHECK(test::finite_difference_error(gamma, g.d_gamma, loss) < 1e-7);
  CHECK(test::finite_difference_error(beta, g.d_beta, loss) < 1e-7);
  // The batch-statistics terms matter: the frozen-statistics input gradient gamma inv_std dz differs.
  double largest_term = 0;
  const BatchStatistics s = batch_statistics_reference(x, l);
  for (size_t i = 0; i < x.size(); ++i) {
    const size_t k = (i / size_t(l.plane)) % size_t(l.channels);
    const double z = gamma[k] * (x[i] - s.mean[k]) / std::sqrt(s.var[k] + kEps) + beta[k];
    const double sg = 1 / (1 + std::exp(-z)), dz = silu ? dy[i] * sg * (1 + z * (1 - sg)) : dy[i];
    largest_term = std::max(largest_term, std::fabs(g.dx[i] - gamma[k] / std::sqrt(s.var[k] + kEps) * dz));
  }
  CHECK(largest_term > 1e-2);
}

void check_output(const std::string& name, const std::vector<float>& got, const std::vector<double>& want,
                  const Tolerance& t) {
  const OutputCheck check = make_check(name, {got.size()}, got, want, t, false);
  INFO(name << ": max abs " << check.metrics.max_abs << ", rel L2 " << check.metrics.rel_l2);
  CHECK(check.pass);
}

// The kernels on `backend_name` against the reference, d gamma / d beta added to earlier values.
void check_kernels(const std::string& backend_name, const BatchNormLayout& l, bool silu, uint64_t seed) {
  auto backend = make_backend(backend_name, test::embedded_context());
  const BatchNormBatchOp op(*backend);
  const size_t n = l.size(), c = size_t(l.channels);
  const std::vector<double> x = seeded_input(l, seed), dy = seeded(n, -1.0, 1.0, seed + 3);
  const std::vector<double> gamma = seeded(c, 0.2, 2.0, seed + 4), beta = seeded(c, -1.0, 1.0, seed + 5);
  const std::vector<double> running_mean = seeded(c, -0.5, 0.5, seed + 6), running_var = seeded(c, 0.1, 2.0, seed + 7);
  const std::vector<double> earlier_gamma = seeded(c, -1.0, 1.0, seed + 8), earlier_beta = seeded(c, -1.0, 1.0, seed + 9);
  const auto up = [&](const std::vector<double>& v) { return backend->upload_vector(std::vector<float>(v.begin(), v.end())); };
  DeviceBuffer x_d = up(x), dy_d = up(dy), gamma_d = up(gamma), beta_d = up(beta), rm_d = up(running_mean),
               rv_d = up(running_var), dg_d = up(earlier_gamma), db_d = up(earlier_beta);
  DeviceBuffer mean_d = backend->alloc_array<float>(c), inv_std_d = backend->alloc_array<float>(c);
  DeviceBuffer y_d = backend->alloc_array<float>(n), dx_d = backend->alloc_array<float>(n);
  DeviceBuffer sum_dz = backend->alloc_array<double>(c), sum_dz_xhat = backend->alloc_array<double>(c);
  const float *xp = x_d.as<const float>(), *gp = gamma_d.as<const float>(), *bp = beta_d.as<const float>();
  op.statistics({xp, mean_d.as<float>(), inv_std_d.as<float>(), rm_d.as<float>(), rv_d.as<float>(), kEps,
                 kMomentum, l.batch, l.channels, l.plane});
  op.apply({xp, mean_d.as<const float>(), inv_std_d.as<const float>(), gp, bp, y_d.as<float>(), l.channels,
            silu ? 1 : 0, l.plane, (long long)n});
  op.backward({xp, dy_d.as<const float>(), mean_d.as<const float>(), inv_std_d.as<const float>(), gp, bp,
               sum_dz.as<double>(), sum_dz_xhat.as<double>(), dg_d.as<float>(), db_d.as<float>(),
               dx_d.as<float>(), l.batch, l.channels, silu ? 1 : 0, l.plane});
  const auto down = [&](const DeviceBuffer& b, size_t count) { return backend->download_vector<float>(b, count); };

  const BatchStatistics s = batch_statistics_reference(x, l);
  std::vector<double> inv_std(c), want_rm = running_mean, want_rv = running_var;
  for (size_t k = 0; k < c; ++k) inv_std[k] = 1 / std::sqrt(s.var[k] + kEps);
  running_statistics_update_reference(want_rm, want_rv, s, l.count(), kMomentum);
  const BatchNormGradientsReference g = batchnorm_backward_reference(x, dy, l, gamma, beta, kEps, silu);
  std::vector<double> want_dg = g.d_gamma, want_db = g.d_beta;
  for (size_t k = 0; k < c; ++k) want_dg[k] += earlier_gamma[k], want_db[k] += earlier_beta[k];
  // Bounds as the runner's (batchnorm_batch_runner.cpp): one float32 rounding of float64 values for the
  // statistics, float32 arithmetic on xhat for y and dx, float64 sums of float32 terms for d gamma, d beta.
  const Tolerance stat{1e-6, 1e-6}, element{1e-6, 1e-5}, sum{1e-5, 1e-5 * std::sqrt(l.count())};
  const Tolerance dx{1e-5, 1e-5};  // cancellation at few values per channel (the runner's note)
  INFO(backend_name << " N=" << l.batch << " C=" << l.channels << " plane=" << l.plane << " silu=" << silu);
  check_output("mean", down(mean_d, c), s.mean, stat);
  check_output("inv_std", down(inv_std_d, c), inv_std, stat);
  check_output("running_mean", down(rm_d, c), want_rm, stat);
  check_output("running_var", down(rv_d, c), want_rv, stat);
  check_output("y", down(y_d, n), batchnorm_forward_reference(x, l, gamma, beta, kEps, silu), element);
  check_output("dx", down(dx_d, n), g.dx, dx);
  check_output("d_gamma", down(dg_d, c), want_dg, sum);
  check_output("d_beta", down(db_d, c), want_db, sum);
}

void check_kernel_shapes(const std::string& backend_name) {
  check_kernels(backend_name, {4, 6, 13 * 11}, true, 100);
  check_kernels(backend_name, {2, 5, 9 * 7}, false, 200);
  check_kernels(backend_name, {2, 16, 1}, true, 300);     // 1x1 maps: two values per channel
  check_kernels(backend_name, {1, 3, 40 * 33}, true, 400);  // batch 1, planes larger than the block
}

// One channel {1, 2, 3, 4} (batch 2 of 2-value planes): mean 2.5, biased variance 1.25, unbiased 5/3;
// from running (0, 1) with momentum 0.03: running mean 0.075, running variance 0.97 + 0.05 = 1.02.
void check_running_update(const std::string& backend_name) {
  auto backend = make_backend(backend_name, test::embedded_context());
  DeviceBuffer x = backend->upload_vector(std::vector<float>{1, 2, 3, 4});
  DeviceBuffer rm = backend->upload_vector(std::vector<float>{0}), rv = backend->upload_vector(std::vector<float>{1});
  DeviceBuffer mean = backend->alloc_array<float>(1), inv_std = backend->alloc_array<float>(1);
  BatchNormBatchOp(*backend).statistics({x.as<const float>(), mean.as<float>(), inv_std.as<float>(),
                                         rm.as<float>(), rv.as<float>(), kEps, kMomentum, 2, 1, 2});
  CHECK(backend->download_vector<float>(mean, 1)[0] == 2.5f);
  CHECK(backend->download_vector<float>(inv_std, 1)[0] == Approx(1 / std::sqrt(1.251)).epsilon(1e-7));
  CHECK(backend->download_vector<float>(rm, 1)[0] == Approx(0.075).epsilon(1e-7));
  CHECK(backend->download_vector<float>(rv, 1)[0] == Approx(1.02).epsilon(1e-7));
}

}  // namespace

TEST_CASE("batchnorm_batch reference backward matches central differences", "[batchnorm_batch]") {
  check_reference_backward(true);
  check_reference_backward(false);
}

TEST_CASE("batchnorm_batch reference statistics and running update match hand-computed values",
          "[batchnorm_batch]") {
  const BatchNormLayout l{2, 1, 2};
  const BatchStatistics s = batch_statistics_reference({1, 2, 3, 4}, l);
  CHECK(s.mean[0] == 2.5);
  CHECK(s.var[0] == 1.25);
  std::vector<double> rm{0}, rv{1};
  running_statistics_update_reference(rm, rv, s, l.count(), kMomentum);
  CHECK(rm[0] == Approx(0.075).epsilon(1e-15));
  CHECK(rv[0] == Approx(1.02).epsilon(1e-15));
}

TEST_CASE("batchnorm_batch kernels match the float64 reference on cpu", "[batchnorm_batch]") {
  check_kernel_shapes("cpu");
  check_running_update("cpu");
}

TEST_CASE("batchnorm_batch refuses a channel of one value", "[batchnorm_batch]") {
  auto backend = make_backend("cpu", test::embedded_context());
  DeviceBuffer buf = backend->alloc_array<float>(4);
  float* p = buf.as<float>();
  CHECK_THROWS_WITH(BatchNormBatchOp(*backend).statistics({p, p, p, nullptr, nullptr, kEps, kMomentum, 1, 4, 1}),
                    "batchnorm_stats: batch-statistics BatchNorm needs at least two values per channel (batch 1 "
                    "x 1 positions)");
}

TEST_CASE("batchnorm_batch kernels match the float64 reference on cuda", "[batchnorm_batch][gpu]") {
  LAB_REQUIRE_GPU_OR_SKIP();
  check_kernel_shapes("cuda");
  check_running_update("cuda");
}
