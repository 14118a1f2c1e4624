// The yolo26_head_loss spec and HeadLossOp: assignment, CIoU, L1 / chain rule, BCE and sums, as launches.
#include "kernels/loss/head_loss_op.hpp"

#include <string>

#include "kernels/loss/head_loss_params.cuh"
#include "kernels/loss/tal_assign_params.cuh"
#include "nvrtc_runtime/errors.hpp"

namespace lab {
namespace {

using K = ParamSpec::Kind;

// row_sums' CTA: each of its 4 CTAs reads a whole row (B x A doubles, 2.15 MB at batch 32, 640) alone, so
// as many loads in flight as one SM holds (256 threads: 72 us a row on the H200).
constexpr int kSumThreads = 1024;
constexpr int kTermRows = 4;  // box, cls, l1, positive (head_loss.cu)

CompileRequest head_loss_compile(const std::string&, const Params& p) {
  const std::string block_n = std::to_string(param_int(p, "BLOCK_N"));
  return {"loss/head_loss.cu",
          {},
          {"box_targets<" + block_n + ">", "box_terms<" + block_n + ">", "cls_terms<" + block_n + ">",
           "row_sums<" + std::to_string(kSumThreads) + ">"}};
}

}  // namespace

const KernelSpec& head_loss_spec() {
  static const std::vector<ParamSpec> params = [] {
    std::vector<ParamSpec> all = assign_problem_params("2", "128", "8", "6");
    all.push_back({"BLOCK_N", K::Int, "256", "threads per CTA of the per-anchor kernels", 32, 1024, true});
    return all;
  }();
  static const KernelSpec spec{
      .name = "yolo26_head_loss",
      .family = "loss",
      .description =
          "one head's YOLO26 loss on the device: tal_assign, CIoU, L1, BCE, d total / d raw outputs "
          "and the sums",
      .source = "loss/head_loss.cu",
      .variants = {{"v1", "dense over the batch's anchors (background weighted 0), a thread per anchor"}},
      .params = params,
      .validate = [](const Params& p) { check_topk2_rule(p, "yolo26_head_loss"); },
      .compile = head_loss_compile};
  return spec;
}

HeadLossOp::HeadLossOp(Backend& backend, int block_n)
    : backend_(backend), block_n_(block_n), assign_(backend, block_n), ciou_(backend, false, block_n) {
  const CompileRequest request =
      head_loss_spec().compile_request("v1", {{"BLOCK_N", std::to_string(block_n)}});
  module_ = backend.compile(request);
  box_targets_ = module_->kernel(request.name_expressions[0]);
  box_terms_ = module_->kernel(request.name_expressions[1]);
  cls_terms_ = module_->kernel(request.name_expressions[2]);
  row_sums_ = module_->kernel(request.name_expressions[3]);
}

HeadLossWorkspace HeadLossOp::allocate(int batch, int max_gts, int anchors) const {
  const size_t n = size_t(batch) * anchors;
  HeadLossWorkspace ws{assign_.allocate(batch, max_gts, anchors),
                       backend_.alloc_array<float>(4 * n),
                       backend_.alloc_array<float>(4 * n),
                       backend_.alloc_array<float>(n),
                       backend_.alloc_array<float>(4 * n),
                       backend_.alloc_array<double>(kTermRows * n),
                       backend_.alloc_array<double>(kTermRows),
                       {backend_.alloc_array<float>(n), backend_.alloc_array<float>(n),
                        backend_.alloc_array<float>(n), backend_.alloc_array<float>(n)}};
  return ws;
}

void HeadLossOp::launch(const HeadLossInputs& in, const loss::AssignerSettings& settings,
                        const HeadLossGains& gains, HeadLossWorkspace& ws, const DeviceBuffer& d_boxes,
                        const DeviceBuffer& d_logits) const {
  assign(in, settings, ws);
  launch_terms(in, gains, ws, d_boxes, d_logits);
}

void HeadLossOp::assign(const HeadLossInputs& in, const loss::AssignerSettings& settings,
                        HeadLossWorkspace& ws) const {
  assign_.assign_into(in.boxes, in.logits, in.classes, in.anchors, in.gts, settings, ws.assignment);
}

void HeadLossOp::launch_terms(const HeadLossInputs& in, const HeadLossGains& gains, HeadLossWorkspace& ws,
                              const DeviceBuffer& d_boxes, const DeviceBuffer& d_logits) const {
  const int batch = in.gts.batch, a = in.anchors.count;
  const size_t n = size_t(batch) * a;
  if (d_boxes.bytes() < 4 * n * sizeof(float) || d_logits.bytes() < n * in.classes * sizeof(float))
    throw UsageError("HeadLossOp: the gradient buffers are smaller than the head outputs");
  if (in.image_height * in.image_width <= 0) throw UsageError("HeadLossOp: the input size must be positive");

  const HeadLossParams p{in.boxes.as<const float>(),
                         in.logits.as<const float>(),
                         in.anchors.x.as<const float>(),
                         in.anchors.y.as<const float>(),
                         in.anchors.stride.as<const float>(),
                         in.gts.boxes.as<const TalGt>(),
                         ws.assignment.gt_of_anchor.as<const int>(),
                         ws.assignment.target_score.as<const double>(),
                         ws.assignment.target_score_sum.as<const double>(),
                         ws.pred_xywh.as<float>(),
                         ws.target_xywh.as<float>(),
                         ws.box_dy.as<float>(),
                         ws.ciou.loss.as<const float>(),
                         ws.d_xywh.as<const float>(),
                         d_boxes.as<float>(),
                         d_logits.as<float>(),
                         ws.terms.as<double>(),
                         batch,
                         a,
                         in.classes,
                         in.gts.max_gts,
                         in.image_width,
                         in.image_height,
                         gains.box,
                         gains.cls,
                         gains.l1,
                         gains.grad_scale};
  const LaunchConfig per_anchor{{unsigned((a + block_n_ - 1) / block_n_), unsigned(batch), 1},
                                {unsigned(block_n_), 1, 1}};
  backend_.launch(box_targets_, per_anchor, kernel_params(p));
  ciou_.forward_into(ws.pred_xywh, ws.target_xywh, int(n), ws.ciou);
  ciou_.backward_into(ws.pred_xywh, ws.target_xywh, ws.ciou, ws.box_dy, int(n), ws.d_xywh);
  backend_.launch(box_terms_, per_anchor, kernel_params(p));
  backend_.launch(cls_terms_, per_anchor, kernel_params(p));

  const RowSumParams term_sums{ws.terms.as<const double>(), ws.sums.as<double>(), int(n)};
  backend_.launch(row_sums_, {{unsigned(kTermRows), 1, 1}, {unsigned(kSumThreads), 1, 1}},
                  kernel_params(term_sums));
}

HeadLossSums HeadLossOp::sums(const HeadLossWorkspace& ws) const {
  double host[kSumValues];
  download_sums_async(ws, host);
  backend_.synchronize();
  return sums_from(host);
}

void HeadLossOp::download_sums_async(const HeadLossWorkspace& ws, double* host) const {
  static_assert(kSumValues == 1 + kTermRows);
  backend_.download_async(host, ws.assignment.target_score_sum.get(), sizeof(double));
  backend_.download_async(host + 1, ws.sums.get(), kTermRows * sizeof(double));
}

HeadLossSums HeadLossOp::sums_from(const double* host) {
  return {host[0], host[1], host[2], host[3], static_cast<int>(host[4])};
}

}  // namespace lab
