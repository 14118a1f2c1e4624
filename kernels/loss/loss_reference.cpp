// Float64 references of the loss kernels. CIoU: one formula template evaluated on doubles (forward) and on
// dual numbers (forward-mode derivative, one pass per pred coordinate). BCE: from its definition
// -(t log sigmoid(x) + (1 - t) log(1 - sigmoid(x))), not from the kernel's rearranged form.
#include "kernels/loss/loss_reference.hpp"

#include <cmath>
#include <numbers>

namespace lab {
namespace {

// A value and its derivative along one direction.
struct Dual {
  double v = 0, d = 0;
  Dual() = default;
  Dual(double value, double derivative = 0) : v(value), d(derivative) {}
};
Dual operator+(Dual a, Dual b) {
  return {a.v + b.v, a.d + b.d};
}
Dual operator-(Dual a, Dual b) {
  return {a.v - b.v, a.d - b.d};
}
Dual operator*(Dual a, Dual b) {
  return {a.v * b.v, a.d * b.v + a.v * b.d};
}
Dual operator/(Dual a, Dual b) {
  return {a.v / b.v, (a.d * b.v - a.v * b.d) / (b.v * b.v)};
}
Dual atan_of(Dual a) {
  return {std::atan(a.v), a.d / (1 + a.v * a.v)};
}
// On a tie the derivative is the mean of both operands' derivatives (the documented tie convention).
Dual lower(Dual a, Dual b) {
  return a.v < b.v ? a : b.v < a.v ? b : Dual{a.v, 0.5 * (a.d + b.d)};
}
Dual upper(Dual a, Dual b) {
  return a.v > b.v ? a : b.v > a.v ? b : Dual{a.v, 0.5 * (a.d + b.d)};
}

double atan_of(double a) {
  return std::atan(a);
}
double lower(double a, double b) {
  return a < b ? a : b;
}
double upper(double a, double b) {
  return a > b ? a : b;
}

template <class T>
struct CiouTerms {
  T loss, iou, v, alpha;
};

// The spec formula (spec/yolo26.md, Loss) on corners made from centre-form boxes. `fixed_alpha`, when not
// null, replaces alpha = v / (v - iou + 1 + eps) by a constant.
template <class T>
CiouTerms<T> ciou_terms(const std::array<T, 4>& pred, const BoxXywh& target, const double* fixed_alpha) {
  const T eps(kCiouEps);
  const T b1_x1 = pred[0] - pred[2] / T(2), b1_x2 = pred[0] + pred[2] / T(2);
  const T b1_y1 = pred[1] - pred[3] / T(2), b1_y2 = pred[1] + pred[3] / T(2);
  const T b2_x1(target[0] - target[2] / 2), b2_x2(target[0] + target[2] / 2);
  const T b2_y1(target[1] - target[3] / 2), b2_y2(target[1] + target[3] / 2);
  const T w1 = b1_x2 - b1_x1, h1 = b1_y2 - b1_y1 + eps;
  const T w2 = b2_x2 - b2_x1, h2 = b2_y2 - b2_y1 + eps;

  const T zero(0);
  const T inter = upper(lower(b1_x2, b2_x2) - upper(b1_x1, b2_x1), zero) *
                  upper(lower(b1_y2, b2_y2) - upper(b1_y1, b2_y1), zero);
  const T uni = w1 * h1 + w2 * h2 - inter + eps;
  CiouTerms<T> r;
  r.iou = inter / uni;

  const T cw = upper(b1_x2, b2_x2) - lower(b1_x1, b2_x1);
  const T ch = upper(b1_y2, b2_y2) - lower(b1_y1, b2_y1);
  const T c2 = cw * cw + ch * ch + eps;
  const T sx = b2_x1 + b2_x2 - b1_x1 - b1_x2, sy = b2_y1 + b2_y2 - b1_y1 - b1_y2;
  const T rho2 = (sx * sx + sy * sy) / T(4);

  const T gap = atan_of(w2 / h2) - atan_of(w1 / h1);
  r.v = T(4 / (std::numbers::pi * std::numbers::pi)) * gap * gap;
  r.alpha = fixed_alpha ? T(*fixed_alpha) : r.v / (r.v - r.iou + T(1 + kCiouEps));
  r.loss = T(1) - (r.iou - (rho2 / c2 + r.v * r.alpha));
  return r;
}

double log_sigmoid(double x) {
  return x >= 0 ? -std::log1p(std::exp(-x)) : x - std::log1p(std::exp(x));
}

}  // namespace

CiouValues ciou_reference(const BoxXywh& pred, const BoxXywh& target) {
  const auto t = ciou_terms<double>(pred, target, nullptr);
  return {t.loss, t.iou, t.v, t.alpha};
}

double ciou_loss_fixed_alpha(const BoxXywh& pred, const BoxXywh& target, double alpha) {
  return ciou_terms<double>(pred, target, &alpha).loss;
}

BoxXywh ciou_gradient_reference(const BoxXywh& pred, const BoxXywh& target, double dy, bool full_alpha_grad) {
  const double alpha = ciou_reference(pred, target).alpha;
  BoxXywh grad{};
  for (int k = 0; k < 4; ++k) {
    std::array<Dual, 4> p;
    for (int j = 0; j < 4; ++j) p[j] = Dual(pred[j], j == k ? 1.0 : 0.0);
    grad[k] = dy * ciou_terms<Dual>(p, target, full_alpha_grad ? nullptr : &alpha).loss.d;
  }
  return grad;
}

BoxXywh box_column(const std::vector<float>& boxes, int n, int i) {
  const size_t s = size_t(n);
  return {boxes[i], boxes[s + i], boxes[2 * s + i], boxes[3 * s + i]};
}

CiouArrays ciou_forward_reference(const std::vector<float>& pred, const std::vector<float>& target, int n) {
  CiouArrays out;
  for (auto* a : {&out.loss, &out.iou, &out.v, &out.alpha}) a->resize(size_t(n));
  for (int i = 0; i < n; ++i) {
    const CiouValues c = ciou_reference(box_column(pred, n, i), box_column(target, n, i));
    out.loss[i] = c.loss;
    out.iou[i] = c.iou;
    out.v[i] = c.v;
    out.alpha[i] = c.alpha;
  }
  return out;
}

std::vector<double> ciou_backward_reference(const std::vector<float>& pred, const std::vector<float>& target,
                                            const std::vector<float>& dy, int n, bool full_alpha_grad) {
  std::vector<double> d_pred(4 * size_t(n));
  for (int i = 0; i < n; ++i) {
    const BoxXywh g =
        ciou_gradient_reference(box_column(pred, n, i), box_column(target, n, i), dy[i], full_alpha_grad);
    for (int k = 0; k < 4; ++k) d_pred[size_t(k) * n + i] = g[k];
  }
  return d_pred;
}

double bce_with_logits_reference(double x, double t) {
  return -(t * log_sigmoid(x) + (1 - t) * log_sigmoid(-x));
}

double bce_with_logits_gradient_reference(double x, double t) {
  return 1 / (1 + std::exp(-x)) - t;
}

std::vector<double> cls_forward_reference(const std::vector<float>& logits, const std::vector<float>& targets,
                                          int c, int n) {
  std::vector<double> loss(size_t(n), 0.0);
  for (int k = 0; k < c; ++k)
    for (int i = 0; i < n; ++i) {
      const size_t at = size_t(k) * n + i;
      loss[i] += bce_with_logits_reference(logits[at], targets[at]);
    }
  return loss;
}

std::vector<double> cls_backward_reference(const std::vector<float>& logits,
                                           const std::vector<float>& targets, const std::vector<float>& dy,
                                           int c, int n) {
  std::vector<double> d(size_t(c) * n);
  for (size_t at = 0; at < d.size(); ++at)
    d[at] = double(dy[at % size_t(n)]) * bce_with_logits_gradient_reference(logits[at], targets[at]);
  return d;
}

}  // namespace lab
