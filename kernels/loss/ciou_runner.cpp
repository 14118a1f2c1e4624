// Runners ciou_fwd and ciou_bwd: seeded box pairs of a BOX_MIX family through CiouOp, checked against the
// float64 reference (loss_reference.hpp).
#include "kernels/loss/loss_inputs.hpp"
#include "kernels/loss/loss_ops.hpp"
#include "kernels/loss/loss_reference.hpp"
#include "kernels/runner.hpp"

namespace lab {
namespace {

std::vector<ParamSpec> ciou_params() {
  using K = ParamSpec::Kind;
  ParamSpec mix{"BOX_MIX", K::Choice, "random",
                "box family: random pairs, or degenerate ones (see docs/kernels/loss.md)"};
  mix.choices = kBoxMixes;
  return {{"N", K::Int, "1000", "anchors (box pairs)", 1, 1 << 28},
          {"BLOCK_N", K::Int, "128", "anchors per CTA (threads per block)", 32, 1024, true},
          mix};
}

// Inputs shared by both runners: the box pairs on the host and on the device.
struct CiouProblem {
  CiouProblem(Backend& backend, const Params& p, uint64_t seed)
      : n(int(param_int(p, "N"))),
        boxes(make_box_pairs(n, param_str(p, "BOX_MIX"), seed)),
        pred(backend.upload_vector(boxes.pred)),
        target(backend.upload_vector(boxes.target)) {}
  int n;
  BoxPairs boxes;
  DeviceBuffer pred, target;
};

// Why the CIoU tolerances are looser than 1e-5 / 1e-4: the intersection and enclosing box use the float32
// corners (x1 = cx - w/2 ...), which carry an absolute rounding error of ~ulp(cx) (~8e-6 at cx ~ 80 cells).
// On boxes a fraction of a cell wide that is up to ~5e-5 relative in inter, hence in iou and the loss
// (measured: rel_l2 ~2.5e-6, max_abs ~2e-5 at N = 5000); the gradients scale like 1/size on such boxes
// (measured: rel_l2 ~3.5e-6, max_abs ~4e-5 on gradients up to ~10). Large N reaches further into both tails.
// The degenerate family is exact in its corners and lands near 1e-7.
constexpr Tolerance kCiouForwardTolerance{1e-5, 2e-4};
constexpr Tolerance kCiouBackwardTolerance{2e-5, 1e-3};

class CiouForwardInstance : public Instance {
 public:
  CiouForwardInstance(Backend& backend, const Params& p, uint64_t seed)
      : backend_(backend), problem_(backend, p, seed), op_(backend, false, int(param_int(p, "BLOCK_N"))) {
    const int n = problem_.n;
    out_ = CiouSaved{backend.alloc_array<float>(n), backend.alloc_array<float>(n),
                     backend.alloc_array<float>(n), backend.alloc_array<float>(n)};
    poison();
  }
  void poison() override {
    for (const DeviceBuffer* b : {&out_.loss, &out_.iou, &out_.v, &out_.alpha})
      backend_.fill_bytes(b->get(), 0xff, b->bytes());  // all-ones bytes = NaN
  }
  void launch() override { op_.forward_into(problem_.pred, problem_.target, problem_.n, out_); }
  std::vector<OutputCheck> check(const std::optional<Tolerance>& tol) override {
    backend_.synchronize();
    const size_t n = size_t(problem_.n);
    const CiouArrays ref = ciou_forward_reference(problem_.boxes.pred, problem_.boxes.target, problem_.n);
    const Tolerance t = tol.value_or(kCiouForwardTolerance);
    std::vector<OutputCheck> checks;
    checks.push_back(make_check("loss", {n}, backend_.download_vector<float>(out_.loss, n), ref.loss, t));
    checks.push_back(make_check("iou", {n}, backend_.download_vector<float>(out_.iou, n), ref.iou, t));
    checks.push_back(make_check("v", {n}, backend_.download_vector<float>(out_.v, n), ref.v, t));
    checks.push_back(make_check("alpha", {n}, backend_.download_vector<float>(out_.alpha, n), ref.alpha, t));
    return checks;
  }
  WorkCounts work() const override {
    const double n = problem_.n;
    return {n * (8 + 4) * sizeof(float), n * 70};  // ~70 flops per anchor, atan and division counted as one
  }

 private:
  Backend& backend_;
  CiouProblem problem_;
  CiouOp op_;
  CiouSaved out_;
};

class CiouBackwardInstance : public Instance {
 public:
  CiouBackwardInstance(Backend& backend, bool full_alpha_grad, const Params& p, uint64_t seed)
      : backend_(backend),
        full_alpha_grad_(full_alpha_grad),
        problem_(backend, p, seed),
        op_(backend, full_alpha_grad, int(param_int(p, "BLOCK_N"))),
        dy_host_(make_loss_weights(problem_.n, seed)),
        dy_(backend.upload_vector(dy_host_)) {
    // The saved values come from the reference (rounded to float32) so this checks the backward kernel alone.
    const CiouArrays ref = ciou_forward_reference(problem_.boxes.pred, problem_.boxes.target, problem_.n);
    auto upload = [&](const std::vector<double>& v) {
      return backend.upload_vector(std::vector<float>(v.begin(), v.end()));
    };
    saved_ = CiouSaved{upload(ref.loss), upload(ref.iou), upload(ref.v), upload(ref.alpha)};
    d_pred_ = backend.alloc_array<float>(4 * size_t(problem_.n));
    poison();
  }
  void poison() override { backend_.fill_bytes(d_pred_.get(), 0xff, d_pred_.bytes()); }
  void launch() override {
    op_.backward_into(problem_.pred, problem_.target, saved_, dy_, problem_.n, d_pred_);
  }
  std::vector<OutputCheck> check(const std::optional<Tolerance>& tol) override {
    backend_.synchronize();
    const size_t n = size_t(problem_.n);
    const auto ref = ciou_backward_reference(problem_.boxes.pred, problem_.boxes.target, dy_host_, problem_.n,
                                             full_alpha_grad_);
    return {make_check("d_pred", {4, n}, backend_.download_vector<float>(d_pred_, 4 * n), ref,
                       tol.value_or(kCiouBackwardTolerance))};
  }
  WorkCounts work() const override {
    const double n = problem_.n;
    return {n * (8 + 3 + 1 + 4) * sizeof(float), n * 110};  // ~110 flops per anchor, sqrt/division as one
  }

 private:
  Backend& backend_;
  bool full_alpha_grad_;
  CiouProblem problem_;
  CiouOp op_;
  std::vector<float> dy_host_;
  DeviceBuffer dy_;
  CiouSaved saved_;
  DeviceBuffer d_pred_;
};

class CiouForwardRunner : public Runner {
 public:
  std::string name() const override { return "ciou_fwd"; }
  std::string family() const override { return "loss"; }
  std::string description() const override {
    return "CIoU loss: pred, target [4,N] XYWH -> loss = 1 - CIoU [N] + saved iou, v, alpha";
  }
  std::string source_path() const override { return kCiouSource; }
  std::vector<KernelVariant> variants() const override {
    return {{"v1", "one CTA per BLOCK_N anchors, one thread per anchor"}};
  }
  std::vector<ParamSpec> params() const override { return ciou_params(); }
  CompileRequest compile_request(const std::string&, const Params& p) const override {
    return ciou_compile_request(int(param_int(p, "BLOCK_N")), false);
  }
  std::unique_ptr<Instance> instantiate(Backend& b, const std::string&, const Params& p,
                                        uint64_t seed) const override {
    return std::make_unique<CiouForwardInstance>(b, p, seed);
  }
};

class CiouBackwardRunner : public Runner {
 public:
  std::string name() const override { return "ciou_bwd"; }
  std::string family() const override { return "loss"; }
  std::string description() const override {
    return "CIoU backward: boxes + saved iou, v, alpha + dy [N] -> d_pred [4,N] (XYWH)";
  }
  std::string source_path() const override { return kCiouSource; }
  std::vector<KernelVariant> variants() const override {
    return {{"const_alpha", "alpha treated as a constant (FULL_ALPHA_GRAD=false, as Ultralytics)"},
            {"full_alpha", "full derivative through alpha (FULL_ALPHA_GRAD=true)"}};
  }
  std::vector<ParamSpec> params() const override { return ciou_params(); }
  CompileRequest compile_request(const std::string& variant, const Params& p) const override {
    return ciou_compile_request(int(param_int(p, "BLOCK_N")), variant == "full_alpha");
  }
  std::unique_ptr<Instance> instantiate(Backend& b, const std::string& variant, const Params& p,
                                        uint64_t seed) const override {
    return std::make_unique<CiouBackwardInstance>(b, variant == "full_alpha", p, seed);
  }
};

RunnerRegistration<CiouForwardRunner> forward_registration;
RunnerRegistration<CiouBackwardRunner> backward_registration;

}  // namespace
}  // namespace lab
