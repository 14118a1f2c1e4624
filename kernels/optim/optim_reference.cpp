// float64 references of the optimizer kernels (optim_reference.hpp).
#include "kernels/optim/optim_reference.hpp"

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

}  // namespace lab
