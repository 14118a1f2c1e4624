// Runner yolo26_head_loss: one head's loss on the device (HeadLossOp: tal_assign, CIoU, L1, BCE, sums) on
// seeded assignment problems, checked against a float64 reference built here from the host assigner
// (assign_image) and the loss kernels' references (CIoU by dual numbers, BCE). `lab bench yolo26_head_loss`
// times the whole head (scenarios/yolo26_head_loss.toml has the batch-32 640 case).
#include <algorithm>
#include <cmath>

#include "kernels/loss/assign_inputs.hpp"
#include "kernels/loss/head_loss_op.hpp"
#include "kernels/loss/host_assigner.hpp"
#include "kernels/loss/loss_reference.hpp"
#include "kernels/runner.hpp"

namespace lab {
namespace {

struct HeadLossReference {
  std::vector<double> sums;  // target-score sum, box, cls, l1, positives
  std::vector<double> d_boxes, d_logits;
};

HeadLossReference reference_head(const AssignCase& c, const loss::AssignerSettings& settings,
                                 const HeadLossGains& gains) {
  const size_t a = c.anchors.size(), nc = size_t(c.classes);
  std::vector<std::vector<loss::Positive>> positives;
  double score_sum = 0;
  for (int b = 0; b < c.batch; ++b) {
    const loss::ImageHead image{c.boxes.data() + b * 4 * a, c.logits.data() + b * nc * a, c.classes};
    positives.push_back(loss::assign_image(c.anchors, image, c.gts[b], settings));
    for (const loss::Positive& p : positives.back()) score_sum += p.score;
  }
  const double tss = std::max(score_sum, 1.0);
  HeadLossReference r{{score_sum, 0, 0, 0, 0},
                      std::vector<double>(c.boxes.size(), 0.0),
                      std::vector<double>(c.logits.size(), 0.0)};
  std::vector<double> target(c.logits.size(), 0.0);
  for (int b = 0; b < c.batch; ++b)
    for (const loss::Positive& p : positives[b]) {
      const loss::GtBox& g = c.gts[b][p.gt];
      target[(b * nc + g.cls) * a + p.anchor] = p.score;
      const double st = c.anchors.stride[p.anchor], ax = c.anchors.x[p.anchor], ay = c.anchors.y[p.anchor];
      const size_t at = b * 4 * a + p.anchor;
      const double ltrb[4] = {c.boxes[at], c.boxes[at + a], c.boxes[at + 2 * a], c.boxes[at + 3 * a]};
      const double target_ltrb[4] = {ax - g.x1 / st, ay - g.y1 / st, g.x2 / st - ax, g.y2 / st - ay};
      const BoxXywh pred{ax + (ltrb[2] - ltrb[0]) / 2, ay + (ltrb[3] - ltrb[1]) / 2, ltrb[0] + ltrb[2],
                         ltrb[1] + ltrb[3]};
      const BoxXywh box{ax + (target_ltrb[2] - target_ltrb[0]) / 2,
                        ay + (target_ltrb[3] - target_ltrb[1]) / 2, target_ltrb[0] + target_ltrb[2],
                        target_ltrb[1] + target_ltrb[3]};
      r.sums[1] += ciou_reference(pred, box).loss * p.score;
      const BoxXywh d =
          ciou_gradient_reference(pred, box, p.score / tss * gains.box * gains.grad_scale, false);
      // cx = ax + (r - l) / 2, w = l + r (and so for y): d/dl = -dcx/2 + dw, d/dr = dcx/2 + dw.
      const double d_ciou[4] = {-d[0] / 2 + d[2], -d[1] / 2 + d[3], d[0] / 2 + d[2], d[1] / 2 + d[3]};
      const double size[4] = {double(c.image_size), double(c.image_size), double(c.image_size),
                              double(c.image_size)};
      for (int k = 0; k < 4; ++k) {
        const double diff = (ltrb[k] - target_ltrb[k]) * st / size[k];
        r.sums[3] += std::abs(diff) / 4 * p.score;
        const double sign = diff > 0 ? 1.0 : diff < 0 ? -1.0 : 0.0;
        r.d_boxes[at + k * a] =
            d_ciou[k] + sign * st / size[k] / 4 * p.score / tss * gains.l1 * gains.grad_scale;
      }
      r.sums[4] += 1;
    }
  for (size_t i = 0; i < c.logits.size(); ++i) {
    r.sums[2] += bce_with_logits_reference(c.logits[i], target[i]);
    r.d_logits[i] =
        bce_with_logits_gradient_reference(c.logits[i], target[i]) * gains.cls * gains.grad_scale / tss;
  }
  return r;
}

double max_abs(const std::vector<double>& v) {
  double m = 0;
  for (double x : v) m = std::max(m, std::abs(x));
  return m;
}

class HeadLossInstance : public InstanceBase {
 public:
  HeadLossInstance(Backend& backend, const std::string&, const Params& p, uint64_t seed)
      : InstanceBase(backend),
        problem_(backend, p, seed),
        op_(backend, int(param_int(p, "BLOCK_N"))),
        ws_(op_.allocate(case_.batch, problem_.gts.max_gts, problem_.anchors.count)),
        d_boxes_(output_array<float>(case_.boxes.size())),
        d_logits_(output_array<float>(case_.logits.size())) {
    ws_.assignment.target_score_sum = output_array<double>(1);
    ws_.sums = output_array<double>(4);
  }
  void launch() override {
    op_.launch({problem_.boxes, problem_.logits, case_.classes, case_.image_size, case_.image_size,
                problem_.anchors, problem_.gts},
               problem_.settings, gains_, ws_, d_boxes_, d_logits_);
  }
  std::vector<OutputCheck> check(const std::optional<Tolerance>& tol) override {
    const HeadLossReference ref = reference_head(case_, problem_.settings, gains_);
    const HeadLossSums s = op_.sums(ws_);
    const double sums[5] = {s.target_score_sum, s.box, s.cls, s.l1, double(s.positives)};
    std::vector<OutputCheck> checks;
    // Float32 CIoU and per-anchor BCE sums added in float64: ~1e-7 relative (the BCE sum of nc terms per
    // anchor is float, as in cls.cu); the positive count exactly.
    const char* names[5] = {"target_score_sum", "box_sum", "cls_sum", "l1_sum", "positives"};
    for (int i = 0; i < 5; ++i) {
      const double rel = i == 4 ? 0.0 : 1e-5;
      checks.push_back(
          make_check(names[i], {1}, {float(sums[i])}, {ref.sums[i]},
                     tol.value_or(Tolerance{rel, rel * std::abs(ref.sums[i]) + (i == 4 ? 0 : 1e-7)})));
    }
    // Gradients: float32 kernels against float64, relative to the largest element.
    for (auto [name, buffer, values] :
         {std::tuple{"d_boxes", &d_boxes_, &ref.d_boxes}, std::tuple{"d_logits", &d_logits_, &ref.d_logits}})
      checks.push_back(make_check(name, {values->size()}, fetch<float>(*buffer, values->size()), *values,
                                  tol.value_or(Tolerance{1e-5, 1e-5 * max_abs(*values)})));
    return checks;
  }
  WorkCounts work() const override {
    // Logits read and their gradient written dominate; the assignment's [B, G, A] float64 planes next.
    const double logits = double(case_.logits.size()),
                 pairs = double(case_.batch) * problem_.gts.max_gts * case_.anchors.size();
    return {logits * 8 + pairs * 68 + double(case_.boxes.size()) * 40, logits * 12 + pairs * 60};
  }

 private:
  AssignProblem problem_;
  const AssignCase& case_ = problem_.host;
  HeadLossOp op_;
  HeadLossWorkspace ws_;
  DeviceBuffer d_boxes_, d_logits_;
  HeadLossGains gains_{7.5, 0.5, 1.5, 1.7};
};

const bool registered = register_runner(head_loss_spec(), make_instance<HeadLossInstance>());

}  // namespace
}  // namespace lab
