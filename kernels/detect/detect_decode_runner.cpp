// Runner for detect_decode: random LTRB distances over a real anchor grid, checked against the reference.
#include <cmath>
#include <limits>

#include "kernels/detect/detect_decode_op.hpp"
#include "kernels/detect/detect_decode_reference.hpp"
#include "kernels/runner.hpp"

namespace lab {
namespace {

class DetectDecodeInstance : public Instance {
 public:
  DetectDecodeInstance(Backend& backend, const Params& p, uint64_t seed)
      : backend_(backend),
        batch_(int(param_int(p, "B"))),
        grid_(make_anchor_grid(int(param_int(p, "IMG_H")), int(param_int(p, "IMG_W")))),
        op_(backend, grid_, int(param_int(p, "BLOCK"))) {
    // Distances in grid units: positive, up to a few cells, as a trained head produces.
    raw_host_ = random_uniform(size_t(batch_) * 4 * grid_.size(), 0.05f, 6.0f, derive_seed(seed, "raw"));
    raw_ = backend.upload_vector(raw_host_);
    out_ = backend.alloc_array<float>(raw_host_.size());
    poison();
  }
  void poison() override { backend_.fill_bytes(out_.get(), 0xff, out_.bytes()); }  // all-ones bytes = NaN
  void launch() override { op_.decode(raw_, batch_, out_); }
  std::vector<OutputCheck> check(const std::optional<Tolerance>& tol) override {
    backend_.synchronize();
    auto out = backend_.download_vector<float>(out_, raw_host_.size());
    // float32 rounding of (a + (r-l)/2) * s with coordinates up to ~4096 px: ~2.4e-4 absolute per ulp.
    Tolerance t{1e-6, 2e-3};
    return {make_check("boxes", {size_t(batch_), 4, grid_.size()}, out,
                       detect_decode_reference(raw_host_, grid_, batch_), tol.value_or(t))};
  }
  WorkCounts work() const override {
    double a = double(grid_.size());
    return {double(batch_) * a * 8 * 4 + a * 3 * 4, double(batch_) * a * 10};
  }

 private:
  Backend& backend_;
  int batch_;
  AnchorGrid grid_;
  DetectDecodeOp op_;
  std::vector<float> raw_host_;
  DeviceBuffer raw_, out_;
};

class DetectDecodeRunner : public Runner {
 public:
  std::string name() const override { return "detect_decode"; }
  std::string family() const override { return "detect"; }
  std::string description() const override {
    return "raw LTRB [B,4,A] + anchor grid -> decoded cx,cy,w,h [B,4,A] (fused)";
  }
  std::string source_path() const override { return kDetectDecodeSource; }
  std::vector<KernelVariant> variants() const override {
    return {{"v1_fused", "one thread per anchor, coalesced loads/stores"}};
  }
  std::vector<ParamSpec> params() const override {
    using K = ParamSpec::Kind;
    return {{"B", K::Int, "1", "batch size", 1, 1024},
            {"IMG_H", K::Int, "640", "input height in pixels (multiple of 32)", 32, 8192},
            {"IMG_W", K::Int, "640", "input width in pixels (multiple of 32)", 32, 8192},
            {"BLOCK", K::Int, "256", "threads per block", 32, 1024, true}};
  }
  void validate(const Params& p) const override {
    for (const char* k : {"IMG_H", "IMG_W"})
      if (param_int(p, k) % 32 != 0)
        throw UsageError(std::string("parameter ") + k + "=" + p.at(k) +
                         " of detect_decode is invalid: " + "must be a multiple of 32 (the largest stride)");
  }
  CompileRequest compile_request(const std::string&, const Params&) const override {
    return {kDetectDecodeSource, {}, {kDetectDecodeKernel}};
  }
  std::unique_ptr<Instance> instantiate(Backend& b, const std::string&, const Params& p,
                                        uint64_t seed) const override {
    return std::make_unique<DetectDecodeInstance>(b, p, seed);
  }
};

RunnerRegistration<DetectDecodeRunner> registration;

}  // namespace
}  // namespace lab
