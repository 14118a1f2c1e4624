// Runner for topk_postprocess: random decoded boxes and class logits (or logits drawn from 8 values, so most
// scores tie and the index tie-break decides), checked row by row against the two-stage reference.
#include <cmath>

#include "kernels/detect/topk_postprocess_op.hpp"
#include "kernels/detect/topk_postprocess_reference.hpp"
#include "kernels/runner.hpp"

namespace lab {
namespace {

// boxes [B, 4, A]: centres in [0, 640) px, sizes in [1, 300) px.
std::vector<float> random_boxes(int batch, int anchors, uint64_t seed) {
  const size_t per_box = size_t(batch) * anchors;
  const std::vector<float> centres = random_uniform(2 * per_box, 0.0f, 640.0f, derive_seed(seed, "centres"));
  const std::vector<float> sizes = random_uniform(2 * per_box, 1.0f, 300.0f, derive_seed(seed, "sizes"));
  std::vector<float> boxes(4 * per_box);
  for (int b = 0; b < batch; ++b)
    for (int row = 0; row < 4; ++row)
      for (int a = 0; a < anchors; ++a) {
        const size_t i = (size_t(b) * 2 + row % 2) * anchors + a;
        boxes[(size_t(b) * 4 + row) * anchors + a] = row < 2 ? centres[i] : sizes[i];
      }
  return boxes;
}

// logits [B, nc, A] in [-8, 4); with `ties`, snapped to 8 values.
std::vector<float> random_logits(size_t count, bool ties, uint64_t seed) {
  std::vector<float> logits = random_uniform(count, -8.0f, 4.0f, derive_seed(seed, "logits"));
  if (ties)
    for (float& x : logits) x = std::floor((x + 8.0f) * (8.0f / 12.0f)) * 1.5f - 6.0f;
  return logits;
}

class TopkInstance : public InstanceBase {
 public:
  TopkInstance(Backend& backend, const std::string&, const Params& p, uint64_t seed)
      : InstanceBase(backend),
        batch_(int(param_int(p, "B"))),
        anchors_(int(param_int(p, "A"))),
        classes_(int(param_int(p, "NC"))),
        max_det_(int(param_int(p, "MAX_DET"))),
        op_(backend, anchors_, classes_, max_det_, batch_),
        boxes_host_(random_boxes(batch_, anchors_, seed)),
        logits_host_(random_logits(size_t(batch_) * anchors_ * classes_, param_bool(p, "TIES"), seed)),
        boxes_(backend.upload_vector(boxes_host_)),
        logits_(backend.upload_vector(logits_host_)),
        out_(output_array<float>(size_t(batch_) * op_.k() * 6)) {}
  void launch() override {
    op_.run(batch_, boxes_.as<const float>(), logits_.as<const float>(), out_.as<float>());
  }
  std::vector<OutputCheck> check(const std::optional<Tolerance>& tol) override {
    // Corners cx -/+ w/2 in float32 with coordinates below ~800 px: a few 1e-5 absolute; scores differ from
    // the float64 sigmoid by float rounding (~1e-7). A wrong pick or order is off by a class or a box.
    return {make_check(
        "detections", {size_t(batch_), size_t(op_.k()), 6}, fetch<float>(out_, size_t(batch_) * op_.k() * 6),
        topk_postprocess_reference(boxes_host_, logits_host_, batch_, anchors_, classes_, max_det_),
        tol.value_or(Tolerance{1e-6, 5e-4}))};
  }
  WorkCounts work() const override {
    const double a = double(batch_) * anchors_;
    return {4.0 * (a * classes_ + a * 4 + a + double(batch_) * op_.k() * (classes_ + 6)), a * classes_};
  }

 private:
  int batch_, anchors_, classes_, max_det_;
  TopkPostprocessOp op_;
  std::vector<float> boxes_host_, logits_host_;
  DeviceBuffer boxes_, logits_, out_;
};

const bool registered = register_runner(topk_postprocess_spec(), make_instance<TopkInstance>());

}  // namespace
}  // namespace lab
