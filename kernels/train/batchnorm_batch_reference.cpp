// Plain float64 loops of batchnorm_batch_reference.hpp.
#include "kernels/train/batchnorm_batch_reference.hpp"

#include <cmath>

namespace lab {
namespace {

double sigmoid(double z) { return 1.0 / (1.0 + std::exp(-z)); }

}  // namespace

BatchStatistics batch_statistics_reference(const std::vector<double>& x, const BatchNormLayout& l) {
  BatchStatistics s{std::vector<double>(size_t(l.channels), 0.0), std::vector<double>(size_t(l.channels), 0.0)};
  for (int c = 0; c < l.channels; ++c) {
    double sum = 0;
    for (int b = 0; b < l.batch; ++b)
      for (long long p = 0; p < l.plane; ++p) sum += x[l.index(b, c, p)];
    const double mean = sum / l.count();
    double squares = 0;
    for (int b = 0; b < l.batch; ++b)
      for (long long p = 0; p < l.plane; ++p) {
        const double d = x[l.index(b, c, p)] - mean;
        squares += d * d;
      }
    s.mean[size_t(c)] = mean, s.var[size_t(c)] = squares / l.count();
  }
  return s;
}

std::vector<double> batchnorm_forward_reference(const std::vector<double>& x, const BatchNormLayout& l,
                                                const std::vector<double>& gamma,
                                                const std::vector<double>& beta, double eps, bool silu) {
  const BatchStatistics s = batch_statistics_reference(x, l);
  std::vector<double> y(l.size());
  for (int b = 0; b < l.batch; ++b)
    for (int c = 0; c < l.channels; ++c)
      for (long long p = 0; p < l.plane; ++p) {
        const size_t i = l.index(b, c, p), k = size_t(c);
        const double z = gamma[k] * (x[i] - s.mean[k]) / std::sqrt(s.var[k] + eps) + beta[k];
        y[i] = silu ? z * sigmoid(z) : z;
      }
  return y;
}

BatchNormGradientsReference batchnorm_backward_reference(const std::vector<double>& x,
                                                         const std::vector<double>& dy,
                                                         const BatchNormLayout& l,
                                                         const std::vector<double>& gamma,
                                                         const std::vector<double>& beta, double eps,
                                                         bool silu) {
  const BatchStatistics s = batch_statistics_reference(x, l);
  BatchNormGradientsReference g{std::vector<double>(l.size()), std::vector<double>(size_t(l.channels), 0.0),
                                std::vector<double>(size_t(l.channels), 0.0)};
  std::vector<double> xhat(l.size()), dz(l.size());
  for (int c = 0; c < l.channels; ++c) {
    const size_t k = size_t(c);
    const double inv_std = 1.0 / std::sqrt(s.var[k] + eps);
    for (int b = 0; b < l.batch; ++b)
      for (long long p = 0; p < l.plane; ++p) {
        const size_t i = l.index(b, c, p);
        xhat[i] = (x[i] - s.mean[k]) * inv_std;
        const double z = gamma[k] * xhat[i] + beta[k], sg = sigmoid(z);
        dz[i] = silu ? dy[i] * sg * (1.0 + z * (1.0 - sg)) : dy[i];
        g.d_beta[k] += dz[i];
        g.d_gamma[k] += dz[i] * xhat[i];
      }
    const double mean_dz = g.d_beta[k] / l.count(), mean_dz_xhat = g.d_gamma[k] / l.count();
    for (int b = 0; b < l.batch; ++b)
      for (long long p = 0; p < l.plane; ++p) {
        const size_t i = l.index(b, c, p);
        g.dx[i] = gamma[k] * inv_std * (dz[i] - mean_dz - xhat[i] * mean_dz_xhat);
      }
  }
  return g;
}

void running_statistics_update_reference(std::vector<double>& running_mean, std::vector<double>& running_var,
                                         const BatchStatistics& batch, double count, double momentum) {
  for (size_t c = 0; c < running_mean.size(); ++c) {
    running_mean[c] = (1.0 - momentum) * running_mean[c] + momentum * batch.mean[c];
    running_var[c] = (1.0 - momentum) * running_var[c] + momentum * batch.var[c] * count / (count - 1.0);
  }
}

}  // namespace lab
