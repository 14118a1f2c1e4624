// Runners cls_fwd and cls_bwd: seeded logits and soft targets [C, N] through ClsBceOp, checked against the
// float64 reference (loss_reference.hpp).
#include "kernels/loss/loss_inputs.hpp"
#include "kernels/loss/loss_ops.hpp"
#include "kernels/loss/loss_reference.hpp"
#include "kernels/runner.hpp"

namespace lab {
namespace {

// What both runners hold: the inputs on the host and on the device, and the op.
struct ClsProblem {
  ClsProblem(Backend& backend, const Params& p, uint64_t seed)
      : c(int(param_int(p, "C"))),
        n(int(param_int(p, "N"))),
        inputs(make_cls_inputs(c, n, seed)),
        logits(backend.upload_vector(inputs.logits)),
        targets(backend.upload_vector(inputs.targets)),
        op(backend, int(param_int(p, "BLOCK_N"))) {}
  int c, n;
  ClsInputs inputs;
  DeviceBuffer logits, targets;
  ClsBceOp op;
};

class ClsForwardInstance : public InstanceBase {
 public:
  ClsForwardInstance(Backend& backend, const std::string&, const Params& p, uint64_t seed)
      : InstanceBase(backend), problem_(backend, p, seed) {}
  void launch() override {
    problem_.op.forward_into(problem_.logits, problem_.targets, problem_.c, problem_.n, loss_);
  }
  std::vector<OutputCheck> check(const std::optional<Tolerance>& tol) override {
    const size_t n = size_t(problem_.n);
    // Per-anchor sums of C non-negative float32 terms: ~C * 2^-24 relative at worst. At C = 80 the sums reach
    // ~300 (ulp 3e-5), so max_abs is 1e-3 (measured: rel_l2 ~1.3e-7, max_abs ~1.4e-4 at N = 5000).
    return {make_check(
        "loss", {n}, fetch<float>(loss_, n),
        cls_forward_reference(problem_.inputs.logits, problem_.inputs.targets, problem_.c, problem_.n),
        tol.value_or(Tolerance{1e-6, 1e-3}))};
  }
  WorkCounts work() const override {
    const double elements = double(problem_.c) * problem_.n;
    return {elements * 2 * sizeof(float) + problem_.n * sizeof(float), elements * 7};
  }

 private:
  ClsProblem problem_;
  DeviceBuffer loss_ = output_array<float>(problem_.n);
};

class ClsBackwardInstance : public InstanceBase {
 public:
  ClsBackwardInstance(Backend& backend, const std::string&, const Params& p, uint64_t seed)
      : InstanceBase(backend), problem_(backend, p, seed), dy_(backend, problem_.n, seed) {}
  void launch() override {
    problem_.op.backward_into(problem_.logits, problem_.targets, dy_.device, problem_.c, problem_.n,
                              d_logits_);
  }
  std::vector<OutputCheck> check(const std::optional<Tolerance>& tol) override {
    const size_t c = size_t(problem_.c), n = size_t(problem_.n);
    // Elementwise dy * (sigmoid(x) - t): a few float32 roundings of values below 2 in magnitude (ulp 2.4e-7;
    // measured: rel_l2 ~6e-8, max_abs ~2.7e-7).
    return {make_check("d_logits", {c, n}, fetch<float>(d_logits_, c * n),
                       cls_backward_reference(problem_.inputs.logits, problem_.inputs.targets, dy_.host,
                                              problem_.c, problem_.n),
                       tol.value_or(Tolerance{1e-6, 2e-6}))};
  }
  WorkCounts work() const override {
    const double elements = double(problem_.c) * problem_.n;
    return {elements * 3 * sizeof(float) + problem_.n * sizeof(float), elements * 6};
  }

 private:
  ClsProblem problem_;
  UpstreamGradient dy_;
  DeviceBuffer d_logits_ = output_array<float>(size_t(problem_.c) * problem_.n);
};

const bool forward_registered = register_runner(cls_fwd_spec(), make_instance<ClsForwardInstance>());
const bool backward_registered = register_runner(cls_bwd_spec(), make_instance<ClsBackwardInstance>());

}  // namespace
}  // namespace lab
