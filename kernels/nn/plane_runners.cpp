// Runners for the weightless nn ops: maxpool2d, upsample_nearest2x and copy_planes, one instance class for
// all three. Inputs and outputs are channel windows of larger poisoned buffers (sliced_buffer.hpp); outputs
// are checked against the float64 references and the channels around the output window must stay untouched.
// These ops only move float32 values, so the results must be exact (tolerance 0).
#include "kernels/nn/plane_ops.hpp"
#include "kernels/nn/plane_reference.hpp"
#include "kernels/nn/sliced_buffer.hpp"
#include "kernels/runner.hpp"

namespace lab {
namespace {

struct PlaneSizes {
  int batch, channels, h, w;  // h x w: the input plane
};

// What is each op's own: its output plane, launch, reference and operations per output element.
struct MaxPoolCase {
  MaxPool2dOp op;
  MaxPoolCase(NnKernels& k, const PlaneSizes& n, const Params& p)
      : op(k, n.channels, int(param_int(p, "K"))) {}
  static int64_t out_plane(const PlaneSizes& n) { return int64_t(n.h) * n.w; }
  void run(const PlaneSizes& n, ConstPlaneView in, PlaneView out) const {
    op.run(n.batch, n.h, n.w, in, out);
  }
  std::vector<double> reference(const std::vector<float>& in, const PlaneSizes& n) const {
    return maxpool2d_reference(in, n.batch, n.channels, n.h, n.w, op.kernel_size());
  }
  double flops_per_output() const { return double(op.kernel_size()) * op.kernel_size(); }
};

struct UpsampleCase {
  UpsampleNearest2xOp op;
  UpsampleCase(NnKernels& k, const PlaneSizes&, const Params&) : op(k) {}
  static int64_t out_plane(const PlaneSizes& n) { return 4 * int64_t(n.h) * n.w; }
  void run(const PlaneSizes& n, ConstPlaneView in, PlaneView out) const {
    op.run(n.batch, n.channels, n.h, n.w, in, out);
  }
  std::vector<double> reference(const std::vector<float>& in, const PlaneSizes& n) const {
    return upsample_nearest2x_reference(in, n.batch, n.channels, n.h, n.w);
  }
  double flops_per_output() const { return 0; }
};

struct CopyPlanesCase {
  CopyPlanesOp op;
  CopyPlanesCase(NnKernels& k, const PlaneSizes&, const Params&) : op(k) {}
  static int64_t out_plane(const PlaneSizes& n) { return int64_t(n.h) * n.w; }
  void run(const PlaneSizes& n, ConstPlaneView in, PlaneView out) const {
    op.run(n.batch, n.channels, out_plane(n), in, out);
  }
  std::vector<double> reference(const std::vector<float>& in, const PlaneSizes&) const {
    return {in.begin(), in.end()};
  }
  double flops_per_output() const { return 0; }
};

template <class Case>
class PlaneInstance : public InstanceBase {
 public:
  PlaneInstance(Backend& backend, const std::string&, const Params& p, uint64_t seed)
      : InstanceBase(backend),
        n_{int(param_int(p, "B")), int(param_int(p, "C")), int(param_int(p, "H")), int(param_int(p, "W"))},
        kernels_(backend),
        case_(kernels_, n_, p),
        in_(backend, n_.batch, n_.channels, int64_t(n_.h) * n_.w, 2, 1),
        out_(backend, n_.batch, n_.channels, Case::out_plane(n_)),
        in_host_(random_uniform(in_.window_elements(), -4.0f, 4.0f, derive_seed(seed, "in"))) {
    in_.upload_window(in_host_);
  }
  void poison() override { out_.poison(); }
  void launch() override { case_.run(n_, in_.view(), out_.view()); }
  std::vector<OutputCheck> check(const std::optional<Tolerance>& tol) override {
    backend_.synchronize();
    return {make_check("out", {size_t(n_.batch), size_t(n_.channels), size_t(Case::out_plane(n_))},
                       out_.download_window(), case_.reference(in_host_, n_), tol.value_or(Tolerance{0, 0})),
            out_.untouched_check("out_neighbours")};
  }
  WorkCounts work() const override {
    return {4.0 * (in_.window_elements() + out_.window_elements()),
            double(out_.window_elements()) * case_.flops_per_output()};
  }

 private:
  PlaneSizes n_;
  NnKernels kernels_;
  Case case_;
  SlicedBuffer in_, out_;
  std::vector<float> in_host_;
};

const bool registered =
    register_runner(maxpool2d_spec(), make_instance<PlaneInstance<MaxPoolCase>>()) &&
    register_runner(upsample_nearest2x_spec(), make_instance<PlaneInstance<UpsampleCase>>()) &&
    register_runner(copy_planes_spec(), make_instance<PlaneInstance<CopyPlanesCase>>());

}  // namespace
}  // namespace lab
