// float64 references of the optimizer kernels, written from torch's formulas (torch.nn.utils.clip_grad_norm_,
// torch.optim.SGD with nesterov=True, torch.optim.AdamW) as plain loops, apart from the kernels. One tensor
// at a time: the caller walks the list, passing each tensor's group settings.
#pragma once
#include <vector>

namespace lab {

// sqrt of the sum of squares of every gradient of the list.
double total_grad_norm_reference(const std::vector<std::vector<double>>& grads);
// torch's clip coefficient: max_norm / (norm + 1e-6), at most 1.
double clip_scale_reference(double total_norm, double max_norm);

// One SGD step of one tensor: d = g + wd*p; buf = d (step 1) or momentum*buf + d; p -= lr*(d + momentum*buf).
void sgd_nesterov_reference_step(std::vector<double>& param, std::vector<double>& buf,
                                 const std::vector<double>& grad, double lr, double momentum,
                                 double weight_decay, int step);

// One AdamW step of one tensor: p *= 1 - lr*wd; m = beta1*m + (1-beta1)*g; v = beta2*v + (1-beta2)*g^2;
// p -= lr / (1 - beta1^step) * m / (sqrt(v / (1 - beta2^step)) + eps).
void adamw_reference_step(std::vector<double>& param, std::vector<double>& exp_avg,
                          std::vector<double>& exp_avg_sq, const std::vector<double>& grad, double lr,
                          double beta1, double beta2, double eps, double weight_decay, int step);

// Muon's zeropower_via_newtonschulz5 on g [rows, cols] (row-major), times `scale`: X = g / (|g|_F + 1e-7),
// transposed when rows > cols; five times X = a X + (b A + c A A) X with A = X X^T; transposed back.
std::vector<double> newton_schulz5_reference(const std::vector<double>& g, int rows, int cols, double scale);

// One MuSGD step of one tensor (ultralytics/optim/muon.py). rows > 0 (a Muon tensor viewed [rows, cols]):
// m = beta m + (1 - beta) g; p -= lr * muon * NS5(g + beta (m - g)) * scale; then the SGD part on the
// updated p with factor lr * sgd; rows = 0: the SGD part alone with factor lr. The SGD buffer starts at 0.
void musgd_reference_step(std::vector<double>& param, std::vector<double>& sgd_buf,
                          std::vector<double>& muon_buf, const std::vector<double>& grad, int rows, int cols,
                          double scale, double lr, double momentum, double weight_decay, double muon,
                          double sgd);

}  // namespace lab
