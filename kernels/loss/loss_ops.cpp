// The specs of ciou_fwd, ciou_bwd, cls_fwd and cls_bwd, and their ops: argument checks, one compile per op,
// and the launch configurations of ciou.cu / cls.cu.
#include "kernels/loss/loss_ops.hpp"

#include <initializer_list>
#include <string>

#include "kernels/loss/ciou_params.cuh"
#include "kernels/loss/cls_params.cuh"
#include "kernels/loss/loss_inputs.hpp"
#include "nvrtc_runtime/errors.hpp"

namespace lab {
namespace {

using K = ParamSpec::Kind;

ParamSpec block_n_param() {
  return {"BLOCK_N", K::Int, "128", "anchors per CTA (threads per block)", 32, 1024, true};
}

// One module holds a spec's forward and backward kernels at BLOCK_N (ciou_bwd's variant picks the alpha
// rule).
CompileRequest ciou_compile(const std::string& variant, const Params& p) {
  const std::string block_n = std::to_string(param_int(p, "BLOCK_N"));
  return {"loss/ciou.cu",
          {},
          {"ciou_forward<" + block_n + ">",
           "ciou_backward<" + block_n + (variant == "full_alpha" ? ", true>" : ", false>")}};
}

CompileRequest cls_compile(const std::string&, const Params& p) {
  const std::string block_n = std::to_string(param_int(p, "BLOCK_N"));
  return {"loss/cls.cu", {}, {"cls_forward<" + block_n + ">", "cls_backward<" + block_n + ">"}};
}

std::vector<ParamSpec> ciou_params() {
  ParamSpec mix{"BOX_MIX", K::Choice, "random",
                "box family: random pairs, or degenerate ones (see docs/kernels/loss.md)"};
  mix.choices = box_mixes();
  return {{"N", K::Int, "1000", "anchors (box pairs)", 1, 1 << 28}, block_n_param(), mix};
}

std::vector<ParamSpec> cls_params() {
  return {{"N", K::Int, "1000", "anchors", 1, 1 << 26},
          {"C", K::Int, "80", "classes", 1, 65535},
          block_n_param()};
}

// A runner's spec over one of the two kernel pairs (ciou.cu or cls.cu: source, parameters, compile).
KernelSpec loss_spec(const char* name, const char* description, std::vector<KernelVariant> variants,
                     bool ciou) {
  return {.name = name,
          .family = "loss",
          .description = description,
          .source = ciou ? "loss/ciou.cu" : "loss/cls.cu",
          .variants = std::move(variants),
          .params = ciou ? ciou_params() : cls_params(),
          .compile = ciou ? ciou_compile : cls_compile};
}

void check_count(const char* op, const char* what, int value, int max) {
  if (value < 0 || value > max)
    throw UsageError(std::string(op) + ": " + what + "=" + std::to_string(value) + " is out of range [0, " +
                     std::to_string(max) + "]");
}

struct NamedBuffer {
  const char* name;
  const DeviceBuffer& buffer;
};

// RuntimeError naming the first buffer that holds fewer than `count` floats.
void check_floats(const char* op, size_t count, std::initializer_list<NamedBuffer> buffers) {
  for (const NamedBuffer& b : buffers)
    if (b.buffer.bytes() < count * sizeof(float))
      throw RuntimeError(std::string(op) + ": buffer '" + b.name + "' holds " +
                         std::to_string(b.buffer.bytes()) + " bytes, fewer than the " +
                         std::to_string(count) + " floats it needs");
}

// A buffer as the kernel reads it, and as it writes it.
const float* in(const DeviceBuffer& b) {
  return b.as<const float>();
}
float* out(const DeviceBuffer& b) {
  return b.as<float>();
}

LaunchConfig tiles(int n, int block_n, unsigned grid_y = 1) {
  return {{unsigned((n + block_n - 1) / block_n), grid_y, 1}, {unsigned(block_n), 1, 1}};
}

constexpr int kMaxAnchors = 1 << 30;  // 4 * N floats must index with 32-bit ints in ciou.cu
constexpr int kMaxClasses = 65535;    // gridDim.y limit of cls_backward

}  // namespace

const KernelSpec& ciou_fwd_spec() {
  static const KernelSpec spec =
      loss_spec("ciou_fwd", "CIoU loss: pred, target [4,N] XYWH -> loss = 1 - CIoU [N] + saved iou, v, alpha",
                {{"v1", "one CTA per BLOCK_N anchors, one thread per anchor"}}, true);
  return spec;
}

const KernelSpec& ciou_bwd_spec() {
  static const KernelSpec spec =
      loss_spec("ciou_bwd", "CIoU backward: boxes + saved iou, v, alpha + dy [N] -> d_pred [4,N] (XYWH)",
                {{"const_alpha", "alpha treated as a constant (FULL_ALPHA_GRAD=false, as Ultralytics)"},
                 {"full_alpha", "full derivative through alpha (FULL_ALPHA_GRAD=true)"}},
                true);
  return spec;
}

const KernelSpec& cls_fwd_spec() {
  static const KernelSpec spec = loss_spec(
      "cls_fwd", "classification BCE with logits: logits, soft targets [C,N] -> per-anchor loss [N]",
      {{"v1", "one thread per anchor walking its C classes (coalesced rows)"}}, false);
  return spec;
}

const KernelSpec& cls_bwd_spec() {
  static const KernelSpec spec =
      loss_spec("cls_bwd", "classification BCE backward: d_logits [C,N] = dy[n] * (sigmoid(x) - t)",
                {{"v1", "one thread per element, grid (N tiles, C)"}}, false);
  return spec;
}

LossOpModule::LossOpModule(Backend& backend, const char* op, const KernelSpec& spec,
                           const std::string& variant, int block_n)
    : backend_(backend), block_n_(block_n) {
  if (block_n < 32 || block_n > 1024 || (block_n & (block_n - 1)) != 0)
    throw UsageError(std::string(op) + ": block_n=" + std::to_string(block_n) +
                     " is invalid: must be a power of two in [32, 1024]");
  const CompileRequest request = spec.compile_request(variant, {{"BLOCK_N", std::to_string(block_n)}});
  module_ = backend.compile(request);
  forward_ = module_->kernel(request.name_expressions[0]);
  backward_ = module_->kernel(request.name_expressions[1]);
}

CiouOp::CiouOp(Backend& backend, bool full_alpha_grad, int block_n)
    : LossOpModule(backend, "CiouOp", ciou_bwd_spec(), full_alpha_grad ? "full_alpha" : "const_alpha",
                   block_n) {}

void CiouOp::forward_into(const DeviceBuffer& pred, const DeviceBuffer& target, int n,
                          const CiouSaved& saved) const {
  check_count("ciou_forward", "n", n, kMaxAnchors / 4);
  check_floats("ciou_forward", 4 * size_t(n), {{"pred", pred}, {"target", target}});
  check_floats("ciou_forward", n,
               {{"loss", saved.loss}, {"iou", saved.iou}, {"v", saved.v}, {"alpha", saved.alpha}});
  if (n == 0) return;
  const CiouForwardParams p{in(pred),         in(target), out(saved.loss), out(saved.iou), out(saved.v),
                            out(saved.alpha), n};
  backend_.launch(forward_, tiles(n, block_n_), kernel_params(p));
}

CiouSaved CiouOp::forward(const DeviceBuffer& pred, const DeviceBuffer& target, int n) const {
  check_count("ciou_forward", "n", n, kMaxAnchors / 4);
  CiouSaved saved{backend_.alloc_array<float>(n), backend_.alloc_array<float>(n),
                  backend_.alloc_array<float>(n), backend_.alloc_array<float>(n)};
  forward_into(pred, target, n, saved);
  return saved;
}

void CiouOp::backward_into(const DeviceBuffer& pred, const DeviceBuffer& target, const CiouSaved& saved,
                           const DeviceBuffer& dy, int n, const DeviceBuffer& d_pred) const {
  check_count("ciou_backward", "n", n, kMaxAnchors / 4);
  check_floats("ciou_backward", 4 * size_t(n), {{"pred", pred}, {"target", target}});
  check_floats("ciou_backward", n, {{"iou", saved.iou}, {"v", saved.v}, {"alpha", saved.alpha}, {"dy", dy}});
  check_floats("ciou_backward", 4 * size_t(n), {{"d_pred", d_pred}});
  if (n == 0) return;
  const CiouBackwardParams p{in(pred),        in(target), in(saved.iou), in(saved.v),
                             in(saved.alpha), in(dy),     out(d_pred),   n};
  backend_.launch(backward_, tiles(n, block_n_), kernel_params(p));
}

DeviceBuffer CiouOp::backward(const DeviceBuffer& pred, const DeviceBuffer& target, const CiouSaved& saved,
                              const DeviceBuffer& dy, int n) const {
  check_count("ciou_backward", "n", n, kMaxAnchors / 4);
  DeviceBuffer d_pred = backend_.alloc_array<float>(4 * size_t(n));
  backward_into(pred, target, saved, dy, n, d_pred);
  return d_pred;
}

ClsBceOp::ClsBceOp(Backend& backend, int block_n)
    : LossOpModule(backend, "ClsBceOp", cls_fwd_spec(), "v1", block_n) {}

void ClsBceOp::forward_into(const DeviceBuffer& logits, const DeviceBuffer& targets, int c, int n,
                            const DeviceBuffer& loss) const {
  check_count("cls_forward", "c", c, kMaxClasses);
  check_count("cls_forward", "n", n, kMaxAnchors);
  check_floats("cls_forward", size_t(c) * n, {{"logits", logits}, {"targets", targets}});
  check_floats("cls_forward", n, {{"loss", loss}});
  if (n == 0) return;
  const ClsForwardParams p{in(logits), in(targets), out(loss), c, n};
  backend_.launch(forward_, tiles(n, block_n_), kernel_params(p));
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
  check_floats("cls_backward", size_t(c) * n, {{"logits", logits}, {"targets", targets}});
  check_floats("cls_backward", n, {{"dy", dy}});
  check_floats("cls_backward", size_t(c) * n, {{"d_logits", d_logits}});
  if (n == 0 || c == 0) return;
  const ClsBackwardParams p{in(logits), in(targets), in(dy), out(d_logits), c, n};
  backend_.launch(backward_, tiles(n, block_n_, unsigned(c)), kernel_params(p));
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
