// Runners cls_fwd and cls_bwd: seeded logits and soft targets [C, N] through ClsBceOp, checked against the
// float64 reference (loss_reference.hpp).
#include "kernels/loss/loss_inputs.hpp"
#include "kernels/loss/loss_ops.hpp"
#include "kernels/loss/loss_reference.hpp"
#include "kernels/runner.hpp"

namespace lab {
namespace {

std::vector<ParamSpec> cls_params() {
  using K = ParamSpec::Kind;
  return {{"N", K::Int, "1000", "anchors", 1, 1 << 26},
          {"C", K::Int, "80", "classes", 1, 65535},
          {"BLOCK_N", K::Int, "128", "anchors per CTA (threads per block)", 32, 1024, true}};
}

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

class ClsForwardInstance : public Instance {
 public:
  ClsForwardInstance(Backend& backend, const Params& p, uint64_t seed)
      : backend_(backend), problem_(backend, p, seed), loss_(backend.alloc_array<float>(problem_.n)) {
    poison();
  }
  void poison() override { backend_.fill_bytes(loss_.get(), 0xff, loss_.bytes()); }  // all-ones bytes = NaN
  void launch() override {
    problem_.op.forward_into(problem_.logits, problem_.targets, problem_.c, problem_.n, loss_);
  }
  std::vector<OutputCheck> check(const std::optional<Tolerance>& tol) override {
    backend_.synchronize();
    const size_t n = size_t(problem_.n);
    // Per-anchor sums of C non-negative float32 terms: ~C * 2^-24 relative at worst. At C = 80 the sums reach
    // ~300 (ulp 3e-5), so max_abs is 1e-3 (measured: rel_l2 ~1.3e-7, max_abs ~1.4e-4 at N = 5000).
    const Tolerance t{1e-6, 1e-3};
    return {make_check(
        "loss", {n}, backend_.download_vector<float>(loss_, n),
        cls_forward_reference(problem_.inputs.logits, problem_.inputs.targets, problem_.c, problem_.n),
        tol.value_or(t))};
  }
  WorkCounts work() const override {
    const double elements = double(problem_.c) * problem_.n;
    return {elements * 2 * sizeof(float) + problem_.n * sizeof(float), elements * 7};
  }

 private:
  Backend& backend_;
  ClsProblem problem_;
  DeviceBuffer loss_;
};

class ClsBackwardInstance : public Instance {
 public:
  ClsBackwardInstance(Backend& backend, const Params& p, uint64_t seed)
      : backend_(backend),
        problem_(backend, p, seed),
        dy_host_(make_loss_weights(problem_.n, seed)),
        dy_(backend.upload_vector(dy_host_)),
        d_logits_(backend.alloc_array<float>(size_t(problem_.c) * problem_.n)) {
    poison();
  }
  void poison() override { backend_.fill_bytes(d_logits_.get(), 0xff, d_logits_.bytes()); }
  void launch() override {
    problem_.op.backward_into(problem_.logits, problem_.targets, dy_, problem_.c, problem_.n, d_logits_);
  }
  std::vector<OutputCheck> check(const std::optional<Tolerance>& tol) override {
    backend_.synchronize();
    const size_t count = size_t(problem_.c) * problem_.n;
    // Elementwise dy * (sigmoid(x) - t): a few float32 roundings of values below 2 in magnitude (ulp 2.4e-7;
    // measured: rel_l2 ~6e-8, max_abs ~2.7e-7).
    const Tolerance t{1e-6, 2e-6};
    return {make_check("d_logits", {size_t(problem_.c), size_t(problem_.n)},
                       backend_.download_vector<float>(d_logits_, count),
                       cls_backward_reference(problem_.inputs.logits, problem_.inputs.targets, dy_host_,
                                              problem_.c, problem_.n),
                       tol.value_or(t))};
  }
  WorkCounts work() const override {
    const double elements = double(problem_.c) * problem_.n;
    return {elements * 3 * sizeof(float) + problem_.n * sizeof(float), elements * 6};
  }

 private:
  Backend& backend_;
  ClsProblem problem_;
  std::vector<float> dy_host_;
  DeviceBuffer dy_, d_logits_;
};

class ClsForwardRunner : public Runner {
 public:
  std::string name() const override { return "cls_fwd"; }
  std::string family() const override { return "loss"; }
  std::string description() const override {
    return "classification BCE with logits: logits, soft targets [C,N] -> per-anchor loss [N]";
  }
  std::string source_path() const override { return kClsSource; }
  std::vector<KernelVariant> variants() const override {
    return {{"v1", "one thread per anchor walking its C classes (coalesced rows)"}};
  }
  std::vector<ParamSpec> params() const override { return cls_params(); }
  CompileRequest compile_request(const std::string&, const Params& p) const override {
    return cls_compile_request(int(param_int(p, "BLOCK_N")));
  }
  std::unique_ptr<Instance> instantiate(Backend& b, const std::string&, const Params& p,
                                        uint64_t seed) const override {
    return std::make_unique<ClsForwardInstance>(b, p, seed);
  }
};

class ClsBackwardRunner : public Runner {
 public:
  std::string name() const override { return "cls_bwd"; }
  std::string family() const override { return "loss"; }
  std::string description() const override {
    return "classification BCE backward: d_logits [C,N] = dy[n] * (sigmoid(x) - t)";
  }
  std::string source_path() const override { return kClsSource; }
  std::vector<KernelVariant> variants() const override {
    return {{"v1", "one thread per element, grid (N tiles, C)"}};
  }
  std::vector<ParamSpec> params() const override { return cls_params(); }
  CompileRequest compile_request(const std::string&, const Params& p) const override {
    return cls_compile_request(int(param_int(p, "BLOCK_N")));
  }
  std::unique_ptr<Instance> instantiate(Backend& b, const std::string&, const Params& p,
                                        uint64_t seed) const override {
    return std::make_unique<ClsBackwardInstance>(b, p, seed);
  }
};

RunnerRegistration<ClsForwardRunner> forward_registration;
RunnerRegistration<ClsBackwardRunner> backward_registration;

}  // namespace
}  // namespace lab
