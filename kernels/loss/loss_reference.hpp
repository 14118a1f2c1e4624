// CPU references (float64) of the four loss kernels: CIoU forward/backward and classification BCE
// forward/backward. The CIoU gradient is not hand-derived: it is forward-mode automatic differentiation
// (dual numbers) of the same formula the forward reference evaluates, so it is independent of the kernel's
// algebra. Ties in min/max/clamp split the gradient evenly (see docs/kernels/loss.md).
#pragma once
#include <array>
#include <vector>

namespace lab {

inline constexpr double kCiouEps = 1e-7;

// A box in centre form: cx, cy, w, h.
using BoxXywh = std::array<double, 4>;

struct CiouValues {
  double loss = 0, iou = 0, v = 0, alpha = 0;
};

// loss = 1 - CIoU of pred against target, and the saved values.
CiouValues ciou_reference(const BoxXywh& pred, const BoxXywh& target);
// The loss with alpha held at a given value: the objective whose gradient the constant-alpha backward is.
double ciou_loss_fixed_alpha(const BoxXywh& pred, const BoxXywh& target, double alpha);
// d loss / d pred (cx, cy, w, h) times dy; alpha constant (Ultralytics) or differentiated.
BoxXywh ciou_gradient_reference(const BoxXywh& pred, const BoxXywh& target, double dy, bool full_alpha_grad);

// Whole-array forms over [4, N] float boxes (rows cx, cy, w, h).
BoxXywh box_column(const std::vector<float>& boxes, int n, int i);
struct CiouArrays {
  std::vector<double> loss, iou, v, alpha;  // each [N]
};
CiouArrays ciou_forward_reference(const std::vector<float>& pred, const std::vector<float>& target, int n);
// d_pred [4, N].
std::vector<double> ciou_backward_reference(const std::vector<float>& pred, const std::vector<float>& target,
                                            const std::vector<float>& dy, int n, bool full_alpha_grad);

// Binary cross-entropy with logits for one element, and its derivative w.r.t. the logit.
double bce_with_logits_reference(double x, double t);
double bce_with_logits_gradient_reference(double x, double t);
// logits, targets [C, N] -> loss [N] (summed over classes); backward -> d_logits [C, N].
std::vector<double> cls_forward_reference(const std::vector<float>& logits, const std::vector<float>& targets,
                                          int c, int n);
std::vector<double> cls_backward_reference(const std::vector<float>& logits,
                                           const std::vector<float>& targets, const std::vector<float>& dy,
                                           int c, int n);

}  // namespace lab
