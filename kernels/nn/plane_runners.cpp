// Runners for the weightless nn ops: maxpool2d, upsample_nearest2x and copy_planes. Inputs and outputs are
// channel windows of larger poisoned buffers (sliced_buffer.hpp); outputs are checked against the float64
// references and the channels around the output window must stay untouched. These ops only move float32
// values, so the results must be exact (tolerance 0).
#include "nvrtc_runtime/errors.hpp"
#include "kernels/nn/plane_ops.hpp"
#include "kernels/nn/plane_reference.hpp"
#include "kernels/nn/sliced_buffer.hpp"
#include "kernels/runner.hpp"

namespace lab {
namespace {

constexpr Tolerance kExact{0, 0};

std::vector<ParamSpec> plane_params(const char* h_help) {
  using K = ParamSpec::Kind;
  return {{"B", K::Int, "1", "batch size", 1, 65535},
          {"C", K::Int, "64", "channels", 1, 65535},
          {"H", K::Int, "20", h_help, 1, 8192},
          {"W", K::Int, "20", "input width", 1, 8192}};
}

// The shared body of the three instances: sizes, NnKernels, an input window with random values and an output
// window; `run` launches the op, `reference` computes the expected dense output.
class PlaneInstance : public Instance {
 public:
  PlaneInstance(Backend& backend, const Params& p, uint64_t seed, int64_t out_plane)
      : batch_(int(param_int(p, "B"))),
        channels_(int(param_int(p, "C"))),
        h_(int(param_int(p, "H"))),
        w_(int(param_int(p, "W"))),
        out_plane_(out_plane),
        kernels_(backend),
        in_(backend, batch_, channels_, int64_t(h_) * w_, 2, 1),
        out_(backend, batch_, channels_, out_plane) {
    in_host_ = random_uniform(in_.window_elements(), -4.0f, 4.0f, derive_seed(seed, "in"));
    in_.upload_window(in_host_);
  }
  void poison() override { out_.poison(); }
  std::vector<OutputCheck> check(const std::optional<Tolerance>& tol) override {
    kernels_.backend().synchronize();
    return {make_check("out", {size_t(batch_), size_t(channels_), size_t(out_plane_)}, out_.download_window(),
                       reference(), tol.value_or(kExact)),
            out_.untouched_check("out_neighbours")};
  }
  WorkCounts work() const override {
    return {4.0 * (in_.window_elements() + out_.window_elements()), flops()};
  }

 protected:
  virtual std::vector<double> reference() const = 0;
  virtual double flops() const { return 0; }
  int batch_, channels_, h_, w_;
  int64_t out_plane_;
  NnKernels kernels_;
  SlicedBuffer in_, out_;
  std::vector<float> in_host_;
};

class MaxPoolInstance : public PlaneInstance {
 public:
  MaxPoolInstance(Backend& b, const Params& p, uint64_t seed)
      : PlaneInstance(b, p, seed, param_int(p, "H") * param_int(p, "W")),
        op_(kernels_, channels_, int(param_int(p, "K"))) {}
  void launch() override { op_.run(batch_, h_, w_, in_.view(), out_.view()); }

 private:
  std::vector<double> reference() const override {
    return maxpool2d_reference(in_host_, batch_, channels_, h_, w_, op_.kernel_size());
  }
  double flops() const override {
    return double(out_.window_elements()) * op_.kernel_size() * op_.kernel_size();
  }
  MaxPool2dOp op_;
};

class UpsampleInstance : public PlaneInstance {
 public:
  UpsampleInstance(Backend& b, const Params& p, uint64_t seed)
      : PlaneInstance(b, p, seed, 4 * param_int(p, "H") * param_int(p, "W")), op_(kernels_) {}
  void launch() override { op_.run(batch_, channels_, h_, w_, in_.view(), out_.view()); }

 private:
  std::vector<double> reference() const override {
    return upsample_nearest2x_reference(in_host_, batch_, channels_, h_, w_);
  }
  UpsampleNearest2xOp op_;
};

class CopyPlanesInstance : public PlaneInstance {
 public:
  CopyPlanesInstance(Backend& b, const Params& p, uint64_t seed)
      : PlaneInstance(b, p, seed, param_int(p, "H") * param_int(p, "W")), op_(kernels_) {}
  void launch() override { op_.run(batch_, channels_, int64_t(h_) * w_, in_.view(), out_.view()); }

 private:
  std::vector<double> reference() const override { return {in_host_.begin(), in_host_.end()}; }
  CopyPlanesOp op_;
};

class MaxPoolRunner : public Runner {
 public:
  std::string name() const override { return "maxpool2d"; }
  std::string family() const override { return "nn"; }
  std::string description() const override {
    return "max_pool2d K (odd), stride 1, padding K/2 with -inf (SPPF) on [B,C,H,W] channel views";
  }
  std::string source_path() const override { return kMaxPool2dSource; }
  std::vector<KernelVariant> variants() const override {
    return {{"v1_direct", "one thread per output element, K x K window through the cache"}};
  }
  std::vector<ParamSpec> params() const override {
    auto p = plane_params("height");
    p.push_back({"K", ParamSpec::Kind::Int, "5", "window size (odd)", 1, 31});
    return p;
  }
  void validate(const Params& p) const override {
    if (param_int(p, "K") % 2 == 0)
      throw UsageError("parameter K=" + p.at("K") + " of maxpool2d is invalid: must be odd (padding K/2)");
  }
  CompileRequest compile_request(const std::string&, const Params&) const override {
    return {kMaxPool2dSource, {}, {kMaxPool2dKernel}};
  }
  std::unique_ptr<Instance> instantiate(Backend& b, const std::string&, const Params& p,
                                        uint64_t seed) const override {
    return std::make_unique<MaxPoolInstance>(b, p, seed);
  }
};

class UpsampleRunner : public Runner {
 public:
  std::string name() const override { return "upsample_nearest2x"; }
  std::string family() const override { return "nn"; }
  std::string description() const override {
    return "nearest x2 upsampling [B,C,H,W] -> [B,C,2H,2W] into a channel view (the neck's Upsample)";
  }
  std::string source_path() const override { return kUpsampleSource; }
  std::vector<KernelVariant> variants() const override {
    return {{"v1_direct", "one thread per output element, coalesced stores"}};
  }
  std::vector<ParamSpec> params() const override { return plane_params("input height"); }
  CompileRequest compile_request(const std::string&, const Params&) const override {
    return {kUpsampleSource, {}, {kUpsampleKernel}};
  }
  std::unique_ptr<Instance> instantiate(Backend& b, const std::string&, const Params& p,
                                        uint64_t seed) const override {
    return std::make_unique<UpsampleInstance>(b, p, seed);
  }
};

class CopyPlanesRunner : public Runner {
 public:
  std::string name() const override { return "copy_planes"; }
  std::string family() const override { return "nn"; }
  std::string description() const override {
    return "channel-slice copy between [B,C,H,W] views (a Concat input that cannot be written in place)";
  }
  std::string source_path() const override { return kCopyPlanesSource; }
  std::vector<KernelVariant> variants() const override { return {{"v1_direct", "one thread per element"}}; }
  std::vector<ParamSpec> params() const override { return plane_params("height"); }
  CompileRequest compile_request(const std::string&, const Params&) const override {
    return {kCopyPlanesSource, {}, {kCopyPlanesKernel}};
  }
  std::unique_ptr<Instance> instantiate(Backend& b, const std::string&, const Params& p,
                                        uint64_t seed) const override {
    return std::make_unique<CopyPlanesInstance>(b, p, seed);
  }
};

RunnerRegistration<MaxPoolRunner> maxpool_registration;
RunnerRegistration<UpsampleRunner> upsample_registration;
RunnerRegistration<CopyPlanesRunner> copy_registration;

}  // namespace
}  // namespace lab
