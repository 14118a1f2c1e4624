// Runners ciou_fwd and ciou_bwd: seeded box pairs of a BOX_MIX family through CiouOp, checked against the
// float64 reference (loss_reference.hpp).
#include "kernels/loss/loss_inputs.hpp"
#include "kernels/loss/loss_ops.hpp"
#include "kernels/loss/loss_reference.hpp"
#include "kernels/runner.hpp"

namespace lab {
namespace {

// Why the CIoU tolerances are looser than 1e-5 / 1e-4: the intersection and enclosing box use the float32
// corners (x1 = cx - w/2 ...), which carry an absolute rounding error of ~ulp(cx) (~8e-6 at cx ~ 80 cells).
// On boxes a fraction of a cell wide that is up to ~5e-5 relative in inter, hence in iou and the loss
// (measured: rel_l2 ~2.5e-6, max_abs ~2e-5 at N = 5000); the gradients scale like 1/size on such boxes
// (measured: rel_l2 ~3.5e-6, max_abs ~4e-5 on gradients up to ~10). Large N reaches further into both tails.
// The degenerate family is exact in its corners and lands near 1e-7.
constexpr Tolerance kCiouForwardTolerance{1e-5, 2e-4};
constexpr Tolerance kCiouBackwardTolerance{2e-5, 1e-3};

// What both runners hold: the box pairs on the host and on the device, their float64 forward, and the op.
struct CiouProblem {
  CiouProblem(Backend& backend, const std::string& variant, const Params& p, uint64_t seed)
      : n(int(param_int(p, "N"))),
        boxes(make_box_pairs(n, param_str(p, "BOX_MIX"), seed)),
        pred(backend.upload_vector(boxes.pred)),
        target(backend.upload_vector(boxes.target)),
        op(backend, variant == "full_alpha", int(param_int(p, "BLOCK_N"))) {}
  CiouArrays reference() const { return ciou_forward_reference(boxes.pred, boxes.target, n); }
  int n;
  BoxPairs boxes;
  DeviceBuffer pred, target;
  CiouOp op;
};

class CiouForwardInstance : public InstanceBase {
 public:
  CiouForwardInstance(Backend& backend, const std::string& variant, const Params& p, uint64_t seed)
      : InstanceBase(backend), problem_(backend, variant, p, seed), n_(size_t(problem_.n)) {}
  void launch() override { problem_.op.forward_into(problem_.pred, problem_.target, problem_.n, out_); }
  std::vector<OutputCheck> check(const std::optional<Tolerance>& tol) override {
    const CiouArrays ref = problem_.reference();
    const Tolerance t = tol.value_or(kCiouForwardTolerance);
    return {make_check("loss", {n_}, fetch<float>(out_.loss, n_), ref.loss, t),
            make_check("iou", {n_}, fetch<float>(out_.iou, n_), ref.iou, t),
            make_check("v", {n_}, fetch<float>(out_.v, n_), ref.v, t),
            make_check("alpha", {n_}, fetch<float>(out_.alpha, n_), ref.alpha, t)};
  }
  WorkCounts work() const override {
    const double n = double(n_);
    return {n * (8 + 4) * sizeof(float), n * 70};  // ~70 flops per anchor, atan and division counted as one
  }

 private:
  CiouProblem problem_;
  size_t n_;
  CiouSaved out_{output_array<float>(n_), output_array<float>(n_), output_array<float>(n_),
                 output_array<float>(n_)};
};

// The saved values of the float64 forward, rounded to float32, on the device.
CiouSaved upload_saved(Backend& backend, const CiouArrays& ref) {
  auto upload = [&](const std::vector<double>& v) {
    return backend.upload_vector(std::vector<float>(v.begin(), v.end()));
  };
  return {upload(ref.loss), upload(ref.iou), upload(ref.v), upload(ref.alpha)};
}

class CiouBackwardInstance : public InstanceBase {
 public:
  CiouBackwardInstance(Backend& backend, const std::string& variant, const Params& p, uint64_t seed)
      : InstanceBase(backend),
        problem_(backend, variant, p, seed),
        full_alpha_grad_(variant == "full_alpha"),
        dy_(backend, problem_.n, seed) {}
  void launch() override {
    problem_.op.backward_into(problem_.pred, problem_.target, saved_, dy_.device, problem_.n, d_pred_);
  }
  std::vector<OutputCheck> check(const std::optional<Tolerance>& tol) override {
    const size_t n = size_t(problem_.n);
    return {make_check("d_pred", {4, n}, fetch<float>(d_pred_, 4 * n),
                       ciou_backward_reference(problem_.boxes.pred, problem_.boxes.target, dy_.host,
                                               problem_.n, full_alpha_grad_),
                       tol.value_or(kCiouBackwardTolerance))};
  }
  WorkCounts work() const override {
    const double n = problem_.n;
    return {n * (8 + 3 + 1 + 4) * sizeof(float), n * 110};  // ~110 flops per anchor, sqrt/division as one
  }

 private:
  CiouProblem problem_;
  bool full_alpha_grad_;
  UpstreamGradient dy_;
  // The saved values come from the reference so this checks the backward kernel alone.
  CiouSaved saved_ = upload_saved(backend_, problem_.reference());
  DeviceBuffer d_pred_ = output_array<float>(4 * size_t(problem_.n));
};

const bool forward_registered = register_runner(ciou_fwd_spec(), make_instance<CiouForwardInstance>());
const bool backward_registered = register_runner(ciou_bwd_spec(), make_instance<CiouBackwardInstance>());

}  // namespace
}  // namespace lab
