// float64 references of the optimizer kernels (optim_reference.hpp).
#include "kernels/optim/optim_reference.hpp"

#include <algorithm>
#include <cmath>

namespace lab {

double total_grad_norm_reference(const std::vector<std::vector<double>>& grads) {
  double sum = 0;
  for (const auto& g : grads)
    for (double x : g) sum += x * x;
  return std::sqrt(sum);
}

double clip_scale_reference(double total_norm, double max_norm) {
  return std::min(1.0, max_norm / (total_norm + 1e-6));
}

void sgd_nesterov_reference_step(std::vector<double>& param, std::vector<double>& buf,
                                 const std::vector<double>& grad, double lr, double momentum,
                                 double weight_decay, int step) {
  buf.resize(param.size());
  for (size_t i = 0; i < param.size(); ++i) {
    const double d = grad[i] + weight_decay * param[i];
    buf[i] = step == 1 ? d : momentum * buf[i] + d;
    param[i] -= lr * (d + momentum * buf[i]);
  }
}

void adamw_reference_step(std::vector<double>& param, std::vector<double>& exp_avg,
                          std::vector<double>& exp_avg_sq, const std::vector<double>& grad, double lr,
                          double beta1, double beta2, double eps, double weight_decay, int step) {
  exp_avg.resize(param.size(), 0.0);
  exp_avg_sq.resize(param.size(), 0.0);
  const double corrected_lr = lr / (1.0 - std::pow(beta1, step));
  const double bias2 = 1.0 - std::pow(beta2, step);
  for (size_t i = 0; i < param.size(); ++i) {
    param[i] *= 1.0 - lr * weight_decay;
    exp_avg[i] = beta1 * exp_avg[i] + (1.0 - beta1) * grad[i];
    exp_avg_sq[i] = beta2 * exp_avg_sq[i] + (1.0 - beta2) * grad[i] * grad[i];
    param[i] -= corrected_lr * exp_avg[i] / (std::sqrt(exp_avg_sq[i] / bias2) + eps);
  }
}

namespace {

using Matrix = std::vector<std::vector<double>>;

Matrix product(const Matrix& a, const Matrix& b) {
  Matrix c(a.size(), std::vector<double>(b[0].size(), 0.0));
  for (size_t i = 0; i < a.size(); ++i)
    for (size_t k = 0; k < b.size(); ++k)
      for (size_t j = 0; j < b[0].size(); ++j) c[i][j] += a[i][k] * b[k][j];
  return c;
}

Matrix transposed(const Matrix& a) {
  Matrix t(a[0].size(), std::vector<double>(a.size()));
  for (size_t i = 0; i < a.size(); ++i)
    for (size_t j = 0; j < a[0].size(); ++j) t[j][i] = a[i][j];
  return t;
}

}  // namespace

std::vector<double> newton_schulz5_reference(const std::vector<double>& g, int rows, int cols, double scale) {
  double norm = 0;
  for (double v : g) norm += v * v;
  norm = std::sqrt(norm) + 1e-7;
  Matrix x(size_t(rows), std::vector<double>(size_t(cols), 0.0));
  for (int i = 0; i < rows; ++i)
    for (int j = 0; j < cols; ++j) x[size_t(i)][size_t(j)] = g[size_t(i) * size_t(cols) + size_t(j)] / norm;
  const bool transpose = rows > cols;
  if (transpose) x = transposed(x);
  for (int step = 0; step < 5; ++step) {
    const Matrix a = product(x, transposed(x));
    const Matrix aa = product(a, a);
    Matrix poly = a;
    for (size_t i = 0; i < a.size(); ++i)
      for (size_t j = 0; j < a.size(); ++j) poly[i][j] = -4.7750 * a[i][j] + 2.0315 * aa[i][j];
    const Matrix px = product(poly, x);
    for (size_t i = 0; i < x.size(); ++i)
      for (size_t j = 0; j < x[0].size(); ++j) x[i][j] = 3.4445 * x[i][j] + px[i][j];
  }
  if (transpose) x = transposed(x);
  std::vector<double> out;
  for (const auto& row : x)
    for (double v : row) out.push_back(v * scale);
  return out;
}

void musgd_reference_step(std::vector<double>& param, std::vector<double>& sgd_buf,
                          std::vector<double>& muon_buf, const std::vector<double>& grad, int rows, int cols,
                          double scale, double lr, double momentum, double weight_decay, double muon,
                          double sgd) {
  sgd_buf.resize(param.size(), 0.0);
  double sgd_lr = lr;
  if (rows > 0) {
    muon_buf.resize(param.size(), 0.0);
    std::vector<double> nesterov(param.size());
    for (size_t i = 0; i < param.size(); ++i) {
      muon_buf[i] = momentum * muon_buf[i] + (1.0 - momentum) * grad[i];
      nesterov[i] = (1.0 - momentum) * grad[i] + momentum * muon_buf[i];
    }
    const std::vector<double> update = newton_schulz5_reference(nesterov, rows, cols, scale);
    for (size_t i = 0; i < param.size(); ++i) param[i] -= lr * muon * update[i];
    sgd_lr = lr * sgd;
  }
  for (size_t i = 0; i < param.size(); ++i) {
    const double d = grad[i] + weight_decay * param[i];
    sgd_buf[i] = momentum * sgd_buf[i] + d;
    param[i] -= sgd_lr * (d + momentum * sgd_buf[i]);
  }
}

}  // namespace lab
