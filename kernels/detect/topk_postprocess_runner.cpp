// Runner for topk_postprocess: random decoded boxes and class logits (or logits drawn from 8 values, so most
// scores tie and the index tie-break decides), checked row by row against the two-stage reference.
#include <algorithm>
#include <cmath>

#include "kernels/detect/topk_postprocess_op.hpp"
#include "kernels/detect/topk_postprocess_reference.hpp"
#include "kernels/runner.hpp"

namespace lab {
namespace {

class TopkInstance : public Instance {
 public:
  TopkInstance(Backend& backend, const Params& p, uint64_t seed)
      : backend_(backend),
        batch_(int(param_int(p, "B"))),
        anchors_(int(param_int(p, "A"))),
        classes_(int(param_int(p, "NC"))),
        max_det_(int(param_int(p, "MAX_DET"))),
        op_(backend, anchors_, classes_, max_det_, batch_) {
    const size_t per_box = size_t(batch_) * anchors_;
    const std::vector<float> centres =
        random_uniform(2 * per_box, 0.0f, 640.0f, derive_seed(seed, "centres"));
    const std::vector<float> sizes = random_uniform(2 * per_box, 1.0f, 300.0f, derive_seed(seed, "sizes"));
    boxes_host_.resize(4 * per_box);
    for (int b = 0; b < batch_; ++b)
      for (int row = 0; row < 4; ++row)
        for (int a = 0; a < anchors_; ++a) {
          const size_t i = (size_t(b) * 2 + row % 2) * anchors_ + a;
          boxes_host_[(size_t(b) * 4 + row) * anchors_ + a] = row < 2 ? centres[i] : sizes[i];
        }
    logits_host_ = random_uniform(per_box * classes_, -8.0f, 4.0f, derive_seed(seed, "logits"));
    if (param_bool(p, "TIES"))
      for (float& x : logits_host_) x = std::floor((x + 8.0f) * (8.0f / 12.0f)) * 1.5f - 6.0f;  // 8 values
    boxes_ = backend.upload_vector(boxes_host_);
    logits_ = backend.upload_vector(logits_host_);
    out_ = backend.alloc_array<float>(size_t(batch_) * op_.k() * 6);
    poison();
  }
  void poison() override { backend_.fill_bytes(out_.get(), 0xff, out_.bytes()); }
  void launch() override {
    op_.run(batch_, boxes_.as<const float>(), logits_.as<const float>(), out_.as<float>());
  }
  std::vector<OutputCheck> check(const std::optional<Tolerance>& tol) override {
    backend_.synchronize();
    const size_t n = size_t(batch_) * op_.k() * 6;
    // Corners cx -/+ w/2 in float32 with coordinates below ~800 px: a few 1e-5 absolute; scores differ from
    // the float64 sigmoid by float rounding (~1e-7). A wrong pick or order is off by a class or a box.
    const Tolerance t{1e-6, 5e-4};
    return {make_check(
        "detections", {size_t(batch_), size_t(op_.k()), 6}, backend_.download_vector<float>(out_, n),
        topk_postprocess_reference(boxes_host_, logits_host_, batch_, anchors_, classes_, max_det_),
        tol.value_or(t))};
  }
  WorkCounts work() const override {
    const double a = double(batch_) * anchors_;
    return {4.0 * (a * classes_ + a * 4 + a + double(batch_) * op_.k() * (classes_ + 6)), a * classes_};
  }

 private:
  Backend& backend_;
  int batch_, anchors_, classes_, max_det_;
  TopkPostprocessOp op_;
  std::vector<float> boxes_host_, logits_host_;
  DeviceBuffer boxes_, logits_, out_;
};

class TopkRunner : public Runner {
 public:
  std::string name() const override { return "topk_postprocess"; }
  std::string family() const override { return "detect"; }
  std::string description() const override {
    return "end-to-end post-process: top-K anchors, then top-K (anchor, class) pairs -> [B,K,6] sorted";
  }
  std::string source_path() const override { return kTopkSource; }
  std::vector<KernelVariant> variants() const override {
    return {{"v1_radix_bitonic", "CTA per image: radix-select the K-th key, bitonic-sort the K survivors"}};
  }
  std::vector<ParamSpec> params() const override {
    using K = ParamSpec::Kind;
    return {{"B", K::Int, "1", "batch size", 1, 65535},
            {"A", K::Int, "8400", "anchors (8400 at 640x640)", 1, 1 << 22},
            {"NC", K::Int, "80", "classes", 1, 4096},
            {"MAX_DET", K::Int, "300", "max detections (K = min(MAX_DET, A) <= 1024)", 1, 1 << 22},
            {"TIES", K::Bool, "false", "logits from 8 values only: most scores tie (index tie-break)"}};
  }
  void validate(const Params& p) const override {
    if (std::min(param_int(p, "MAX_DET"), param_int(p, "A")) > kTopkMaxK)
      throw UsageError("parameter MAX_DET=" + p.at("MAX_DET") +
                       " of topk_postprocess is invalid: K = min(MAX_DET, A) must be at most 1024");
    if (param_int(p, "NC") * std::min(param_int(p, "MAX_DET"), param_int(p, "A")) > (int64_t(1) << 30))
      throw UsageError("parameter NC=" + p.at("NC") +
                       " of topk_postprocess is invalid: K * NC must be at most 2^30");
  }
  CompileRequest compile_request(const std::string&, const Params&) const override {
    return {kTopkSource, {}, {kTopkAnchorKeysKernel, kTopkSelectKernel}};
  }
  std::unique_ptr<Instance> instantiate(Backend& b, const std::string&, const Params& p,
                                        uint64_t seed) const override {
    return std::make_unique<TopkInstance>(b, p, seed);
  }
};

RunnerRegistration<TopkRunner> registration;

}  // namespace
}  // namespace lab
