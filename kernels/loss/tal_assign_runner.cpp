// Runner tal_assign: seeded assignment problems (assign_inputs.hpp) through TalAssignOp, checked against the
// host float64 assigner (assign_image): the positive set exactly, the target scores to float rounding.
#include "kernels/loss/assign_inputs.hpp"
#include "kernels/loss/host_assigner.hpp"
#include "kernels/loss/tal_assign_op.hpp"
#include "kernels/runner.hpp"

namespace lab {
namespace {

class TalAssignInstance : public InstanceBase {
 public:
  TalAssignInstance(Backend& backend, const std::string&, const Params& p, uint64_t seed)
      : InstanceBase(backend),
        problem_(backend, p, seed),
        op_(backend, int(param_int(p, "BLOCK_N")), int(param_int(p, "THREADS"))),
        out_(op_.allocate(case_.batch, problem_.gts.max_gts, problem_.anchors.count)) {
    out_.gt_of_anchor = output_array<int>(count());
    out_.target_score = output_array<double>(count());
    out_.target_score_sum = output_array<double>(1);
  }
  void launch() override {
    op_.assign_into(problem_.boxes, problem_.logits, case_.classes, problem_.anchors, problem_.gts,
                    problem_.settings, out_);
  }
  std::vector<OutputCheck> check(const std::optional<Tolerance>& tol) override {
    const size_t a = case_.anchors.size();
    std::vector<double> ref_gt(count(), -1.0), ref_score(count(), 0.0);
    for (int b = 0; b < case_.batch; ++b) {
      const loss::ImageHead image{case_.boxes.data() + size_t(b) * 4 * a,
                                  case_.logits.data() + size_t(b) * case_.classes * a, case_.classes};
      for (const loss::Positive& p :
           loss::assign_image(case_.anchors, image, case_.gts[b], problem_.settings))
        ref_gt[b * a + p.anchor] = p.gt, ref_score[b * a + p.anchor] = p.score;
    }
    double ref_sum = 0;
    for (double score : ref_score) ref_sum += score;
    const std::vector<int> gt = fetch<int>(out_.gt_of_anchor, count());
    const std::vector<double> score = fetch<double>(out_.target_score, count());
    const std::vector<size_t> shape{size_t(case_.batch), a};
    // The positive set exactly (a flipped anchor is off by at least 1). Scores in [0, 1] are computed in
    // float64 like the reference (a few ulp apart on cuda, whose atan/exp/pow differ from the host's by ~2
    // ulp) and compared as float32: at most 6e-8 apart.
    return {
        make_check("gt_of_anchor", shape, std::vector<float>(gt.begin(), gt.end()), ref_gt, Tolerance{0, 0}),
        make_check("target_score", shape, std::vector<float>(score.begin(), score.end()), ref_score,
                   tol.value_or(Tolerance{1e-7, 1e-7})),
        // The sum of the scores, compared as float32: 6e-8 relative.
        make_check("target_score_sum", {1}, {float(fetch<double>(out_.target_score_sum, 1)[0])}, {ref_sum},
                   tol.value_or(Tolerance{1e-7, 1e-7 * ref_sum}))};
  }
  WorkCounts work() const override {
    // The two [B, G, A] float64 planes written and read twice, the boxes and one logit per (gt, anchor).
    const double pairs = double(case_.batch) * problem_.gts.max_gts * case_.anchors.size();
    return {pairs * (16 * 3 + 20) + double(count()) * 28, pairs * 60};
  }

 private:
  size_t count() const { return size_t(case_.batch) * case_.anchors.size(); }

  AssignProblem problem_;
  const AssignCase& case_ = problem_.host;
  TalAssignOp op_;
  TalAssignment out_;
};

const bool registered = register_runner(tal_assign_spec(), make_instance<TalAssignInstance>());

}  // namespace
}  // namespace lab
