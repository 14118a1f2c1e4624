// CiouOp and ClsBceOp: argument checks, one compile per op, and the launch configurations of ciou.cu /
// cls.cu.
#include "kernels/loss/loss_ops.hpp"

#include "nvrtc_runtime/errors.hpp"

namespace lab {
namespace {

void check_block_n(const char* op, int block_n) {
  if (block_n < 32 || block_n > 1024 || (block_n & (block_n - 1)) != 0)
    throw UsageError(std::string(op) + ": block_n=" + std::to_string(block_n) +
                     " is invalid: must be a power of two in [32, 1024]");
}

void check_count(const char* op, const char* what, int value, int max) {
  if (value < 0 || value > max)
    throw UsageError(std::string(op) + ": " + what + "=" + std::to_string(value) + " is out of range [0, " +
                     std::to_string(max) + "]");
}

void check_floats(const char* op, const char* buffer, const DeviceBuffer& b, size_t count) {
  if (b.bytes() < count * sizeof(float))
    throw RuntimeError(std::string(op) + ": buffer '" + buffer + "' holds " + std::to_string(b.bytes()) +
                       " bytes, fewer than the " + std::to_string(count) + " floats it needs");
}

LaunchConfig tiles(int n, int block_n, unsigned grid_y = 1) {
  LaunchConfig cfg;
  cfg.grid = {unsigned((n + block_n - 1) / block_n), grid_y, 1};
  cfg.block = {unsigned(block_n), 1, 1};
  return cfg;
}

constexpr int kMaxAnchors = 1 << 30;  // 4 * N floats must index with 32-bit ints in ciou.cu
constexpr int kMaxClasses = 65535;    // gridDim.y limit of cls_backward

}  // namespace

std::string ciou_forward_name(int block_n) {
  return "ciou_forward<" + std::to_string(block_n) + ">";
}
std::string ciou_backward_name(int block_n, bool full_alpha_grad) {
  return "ciou_backward<" + std::to_string(block_n) + ", " + (full_alpha_grad ? "true" : "false") + ">";
}
CompileRequest ciou_compile_request(int block_n, bool full_alpha_grad) {
  return {kCiouSource, {}, {ciou_forward_name(block_n), ciou_backward_name(block_n, full_alpha_grad)}};
}
std::string cls_forward_name(int block_n) {
  return "cls_forward<" + std::to_string(block_n) + ">";
}
std::string cls_backward_name(int block_n) {
  return "cls_backward<" + std::to_string(block_n) + ">";
}
CompileRequest cls_compile_request(int block_n) {
  return {kClsSource, {}, {cls_forward_name(block_n), cls_backward_name(block_n)}};
}

CiouOp::CiouOp(Backend& backend, bool full_alpha_grad, int block_n) : backend_(backend), block_n_(block_n) {
  check_block_n("CiouOp", block_n);
  module_ = backend.compile(ciou_compile_request(block_n, full_alpha_grad));
  forward_ = module_->kernel(ciou_forward_name(block_n));
  backward_ = module_->kernel(ciou_backward_name(block_n, full_alpha_grad));
}

void CiouOp::forward_into(const DeviceBuffer& pred, const DeviceBuffer& target, int n,
                          const CiouSaved& out) const {
  check_count("ciou_forward", "n", n, kMaxAnchors / 4);
  check_floats("ciou_forward", "pred", pred, 4 * size_t(n));
  check_floats("ciou_forward", "target", target, 4 * size_t(n));
  check_floats("ciou_forward", "loss", out.loss, n);
  check_floats("ciou_forward", "iou", out.iou, n);
  check_floats("ciou_forward", "v", out.v, n);
  check_floats("ciou_forward", "alpha", out.alpha, n);
  if (n == 0) return;
  const float *p = pred.as<const float>(), *t = target.as<const float>();
  float *loss = out.loss.as<float>(), *iou = out.iou.as<float>();
  float *v = out.v.as<float>(), *alpha = out.alpha.as<float>();
  backend_.launch(forward_, tiles(n, block_n_), kernel_args(p, t, n, loss, iou, v, alpha));
}

CiouSaved CiouOp::forward(const DeviceBuffer& pred, const DeviceBuffer& target, int n) const {
  check_count("ciou_forward", "n", n, kMaxAnchors / 4);
  CiouSaved out{backend_.alloc_array<float>(n), backend_.alloc_array<float>(n),
                backend_.alloc_array<float>(n), backend_.alloc_array<float>(n)};
  forward_into(pred, target, n, out);
  return out;
}

void CiouOp::backward_into(const DeviceBuffer& pred, const DeviceBuffer& target, const CiouSaved& saved,
                           const DeviceBuffer& dy, int n, const DeviceBuffer& d_pred) const {
  check_count("ciou_backward", "n", n, kMaxAnchors / 4);
  check_floats("ciou_backward", "pred", pred, 4 * size_t(n));
  check_floats("ciou_backward", "target", target, 4 * size_t(n));
  check_floats("ciou_backward", "iou", saved.iou, n);
  check_floats("ciou_backward", "v", saved.v, n);
  check_floats("ciou_backward", "alpha", saved.alpha, n);
  check_floats("ciou_backward", "dy", dy, n);
  check_floats("ciou_backward", "d_pred", d_pred, 4 * size_t(n));
  if (n == 0) return;
  const float *p = pred.as<const float>(), *t = target.as<const float>();
  const float *iou = saved.iou.as<const float>(), *v = saved.v.as<const float>();
  const float *alpha = saved.alpha.as<const float>(), *g = dy.as<const float>();
  float* out = d_pred.as<float>();
  backend_.launch(backward_, tiles(n, block_n_), kernel_args(p, t, iou, v, alpha, g, n, out));
}

DeviceBuffer CiouOp::backward(const DeviceBuffer& pred, const DeviceBuffer& target, const CiouSaved& saved,
                              const DeviceBuffer& dy, int n) const {
  check_count("ciou_backward", "n", n, kMaxAnchors / 4);
  DeviceBuffer d_pred = backend_.alloc_array<float>(4 * size_t(n));
  backward_into(pred, target, saved, dy, n, d_pred);
  return d_pred;
}

ClsBceOp::ClsBceOp(Backend& backend, int block_n) : backend_(backend), block_n_(block_n) {
  check_block_n("ClsBceOp", block_n);
  module_ = backend.compile(cls_compile_request(block_n));
  forward_ = module_->kernel(cls_forward_name(block_n));
  backward_ = module_->kernel(cls_backward_name(block_n));
}

void ClsBceOp::forward_into(const DeviceBuffer& logits, const DeviceBuffer& targets, int c, int n,
                            const DeviceBuffer& loss) const {
  check_count("cls_forward", "c", c, kMaxClasses);
  check_count("cls_forward", "n", n, kMaxAnchors);
  check_floats("cls_forward", "logits", logits, size_t(c) * n);
  check_floats("cls_forward", "targets", targets, size_t(c) * n);
  check_floats("cls_forward", "loss", loss, n);
  if (n == 0) return;
  const float *x = logits.as<const float>(), *t = targets.as<const float>();
  float* out = loss.as<float>();
  backend_.launch(forward_, tiles(n, block_n_), kernel_args(x, t, c, n, out));
}

DeviceBuffer ClsBceOp::forward(const DeviceBuffer& logits, const DeviceBuffer& targets, int c, int n) const {
  check_count("cls_forward", "n", n, kMaxAnchors);
  DeviceBuffer loss = backend_.alloc_array<float>(n);
  forward_into(logits, targets, c, n, loss);
  return loss;
}

void ClsBceOp::backward_into(const DeviceBuffer& logits, const DeviceBuffer& targets, const DeviceBuffer& dy,
                             int c, int n, const DeviceBuffer& d_logits) const {
  check_count("cls_backward", "c", c, kMaxClasses);
  check_count("cls_backward", "n", n, kMaxAnchors);
  check_floats("cls_backward", "logits", logits, size_t(c) * n);
  check_floats("cls_backward", "targets", targets, size_t(c) * n);
  check_floats("cls_backward", "dy", dy, n);
  check_floats("cls_backward", "d_logits", d_logits, size_t(c) * n);
  if (n == 0 || c == 0) return;
  const float *x = logits.as<const float>(), *t = targets.as<const float>(), *g = dy.as<const float>();
  float* out = d_logits.as<float>();
  backend_.launch(backward_, tiles(n, block_n_, unsigned(c)), kernel_args(x, t, g, c, n, out));
}

DeviceBuffer ClsBceOp::backward(const DeviceBuffer& logits, const DeviceBuffer& targets,
                                const DeviceBuffer& dy, int c, int n) const {
  check_count("cls_backward", "c", c, kMaxClasses);
  check_count("cls_backward", "n", n, kMaxAnchors);
  DeviceBuffer d_logits = backend_.alloc_array<float>(size_t(c) * n);
  backward_into(logits, targets, dy, c, n, d_logits);
  return d_logits;
}

}  // namespace lab
