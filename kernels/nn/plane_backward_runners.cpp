// Runners for the weightless layers' backward: maxpool2d_backward, upsample_nearest2x_backward, add_planes,
// one instance class for all three. Gradients are channel windows of larger poisoned buffers
// (sliced_buffer.hpp); with ACCUMULATE the input-gradient window starts from seeded values the result must
// add to. The gradients are multiples of 1/256 in [-4, 4), so every sum of the kernels (at most K*K terms
// plus the prior value) is exact in float32 whatever its order: the results must equal the float64 references
// exactly (tolerance 0).
#include <cmath>
#include <optional>

#include "kernels/nn/plane_backward_ops.hpp"
#include "kernels/nn/plane_backward_reference.hpp"
#include "kernels/nn/sliced_buffer.hpp"
#include "kernels/runner.hpp"

namespace lab {
namespace {

struct PlaneSizes {
  int batch, channels, h, w;  // h x w: the input plane (of the forward)
};

std::vector<float> dyadic_uniform(size_t n, uint64_t seed) {
  std::vector<float> v = random_uniform(n, -4.0f, 4.0f, seed);
  for (float& x : v) x = std::floor(x * 256.0f) / 256.0f;
  return v;
}

// What is each op's own: its gradient planes, the forward input it reads (if any), launch and reference.
struct MaxPoolBackwardCase {
  static constexpr bool kReadsForwardInput = true;
  MaxPool2dBackwardOp op;
  bool ties;
  MaxPoolBackwardCase(NnBackwardKernels& k, const PlaneSizes& n, const Params& p, const std::string& variant)
      : op(k, n.channels, int(param_int(p, "K")), parse_pool_backward_variant(variant)),
        ties(param_bool(p, "TIES")) {}
  static int64_t grad_out_plane(const PlaneSizes& n) { return int64_t(n.h) * n.w; }
  std::vector<float> forward_input(size_t count, uint64_t seed) const {
    std::vector<float> v = random_uniform(count, -4.0f, 4.0f, seed);
    if (ties)
      for (float& x : v) x = std::round(x / 2.0f);  // {-2, ..., 2}
    return v;
  }
  void run(const PlaneSizes& n, ConstPlaneView in, ConstPlaneView grad_out, PlaneView grad_in,
           GradientWrite write) const {
    op.run(n.batch, n.h, n.w, in, grad_out, grad_in, write);
  }
  std::vector<double> reference(const std::vector<float>& in, const std::vector<float>& grad_out,
                                const PlaneSizes& n) const {
    return maxpool2d_backward_reference(in, grad_out, n.batch, n.channels, n.h, n.w, op.kernel_size());
  }
  double flops_per_input() const { return std::pow(double(op.kernel_size()), 4); }  // the windows' re-scans
};

struct UpsampleBackwardCase {
  static constexpr bool kReadsForwardInput = false;
  UpsampleNearest2xBackwardOp op;
  UpsampleBackwardCase(NnBackwardKernels& k, const PlaneSizes&, const Params&, const std::string&) : op(k) {}
  static int64_t grad_out_plane(const PlaneSizes& n) { return 4 * int64_t(n.h) * n.w; }
  void run(const PlaneSizes& n, ConstPlaneView, ConstPlaneView grad_out, PlaneView grad_in,
           GradientWrite write) const {
    op.run(n.batch, n.channels, n.h, n.w, grad_out, grad_in, write);
  }
  std::vector<double> reference(const std::vector<float>&, const std::vector<float>& grad_out,
                                const PlaneSizes& n) const {
    return upsample_nearest2x_backward_reference(grad_out, n.batch, n.channels, n.h, n.w);
  }
  double flops_per_input() const { return 4; }
};

struct AddPlanesCase {
  static constexpr bool kReadsForwardInput = false;
  AddPlanesOp op;
  AddPlanesCase(NnBackwardKernels& k, const PlaneSizes&, const Params&, const std::string&) : op(k) {}
  static int64_t grad_out_plane(const PlaneSizes& n) { return int64_t(n.h) * n.w; }
  void run(const PlaneSizes& n, ConstPlaneView, ConstPlaneView src, PlaneView dst,
           GradientWrite write) const {
    op.run(n.batch, n.channels, grad_out_plane(n), src, dst, write);
  }
  std::vector<double> reference(const std::vector<float>&, const std::vector<float>& src,
                                const PlaneSizes&) const {
    return {src.begin(), src.end()};
  }
  double flops_per_input() const { return 1; }
};

template <class Case>
class PlaneBackwardInstance : public InstanceBase {
 public:
  PlaneBackwardInstance(Backend& backend, const std::string& variant, const Params& p, uint64_t seed)
      : InstanceBase(backend),
        n_{int(param_int(p, "B")), int(param_int(p, "C")), int(param_int(p, "H")), int(param_int(p, "W"))},
        write_(param_bool(p, "ACCUMULATE") ? GradientWrite::Accumulate : GradientWrite::Overwrite),
        kernels_(backend),
        case_(kernels_, n_, p, variant),
        grad_out_(backend, n_.batch, n_.channels, Case::grad_out_plane(n_), 1, 2),
        grad_in_(backend, n_.batch, n_.channels, int64_t(n_.h) * n_.w),
        grad_out_host_(dyadic_uniform(grad_out_.window_elements(), derive_seed(seed, "grad_out"))),
        prior_host_(dyadic_uniform(grad_in_.window_elements(), derive_seed(seed, "prior"))) {
    if constexpr (Case::kReadsForwardInput) {
      in_.emplace(backend, n_.batch, n_.channels, int64_t(n_.h) * n_.w, 2, 1);
      in_host_ = case_.forward_input(in_->window_elements(), derive_seed(seed, "in"));
      in_->upload_window(in_host_);
    }
    grad_out_.upload_window(grad_out_host_);
    reset_grad_in();
  }
  void poison() override { reset_grad_in(); }
  void launch() override {
    case_.run(n_, in_ ? in_->view() : ConstPlaneView{}, grad_out_.view(), grad_in_.view(), write_);
  }
  std::vector<OutputCheck> check(const std::optional<Tolerance>& tol) override {
    backend_.synchronize();
    std::vector<double> ref = case_.reference(in_host_, grad_out_host_, n_);
    if (write_ == GradientWrite::Accumulate)
      for (size_t i = 0; i < ref.size(); ++i) ref[i] += prior_host_[i];
    return {make_check("grad_in", {size_t(n_.batch), size_t(n_.channels), size_t(n_.h) * n_.w},
                       grad_in_.download_window(), ref, tol.value_or(Tolerance{0, 0})),
            grad_in_.untouched_check("grad_in_neighbours")};
  }
  WorkCounts work() const override {
    const double reads = double(grad_out_.window_elements() + in_host_.size()) +
                         (write_ == GradientWrite::Accumulate ? grad_in_.window_elements() : 0);
    return {4.0 * (reads + grad_in_.window_elements()),
            double(grad_in_.window_elements()) * case_.flops_per_input()};
  }

 private:
  // Poison in the input-gradient buffer; when accumulating, its window holds the earlier contribution.
  void reset_grad_in() {
    if (write_ == GradientWrite::Accumulate)
      grad_in_.upload_window(prior_host_);
    else
      grad_in_.poison();
  }

  PlaneSizes n_;
  GradientWrite write_;
  NnBackwardKernels kernels_;
  Case case_;
  std::optional<SlicedBuffer> in_;  // the forward input, for the ops that read it
  SlicedBuffer grad_out_, grad_in_;
  std::vector<float> in_host_, grad_out_host_, prior_host_;
};

const bool registered =
    register_runner(maxpool2d_backward_spec(), make_instance<PlaneBackwardInstance<MaxPoolBackwardCase>>()) &&
    register_runner(upsample_nearest2x_backward_spec(),
                    make_instance<PlaneBackwardInstance<UpsampleBackwardCase>>()) &&
    register_runner(add_planes_spec(), make_instance<PlaneBackwardInstance<AddPlanesCase>>());

}  // namespace
}  // namespace lab
