// topk_postprocess: spec, op (compile once, size the scratch per batch, two launches per call), float64
// reference (two-stage top-k: stage 1 over anchors, stage 2 over the (rank, class) pairs, each a partial sort
// by key descending, index ascending), and runner (random decoded boxes and class logits, or logits drawn
// from 8 values, so most scores tie and the index tie-break decides, checked row by row against the
// reference).
#include "kernels/detect/topk_postprocess.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <string>

#include "kernels/detect/topk_postprocess_params.cuh"
#include "kernels/runner.hpp"
#include "nvrtc_runtime/errors.hpp"

namespace lab {
namespace {

constexpr int kMaxK = 1024;  // the select kernel's shared slots

// Indices of the k best entries of `keys`, best first (larger key, then lower index).
std::vector<uint32_t> top_indices(const std::vector<uint32_t>& keys, int k) {
  std::vector<uint32_t> idx(keys.size());
  std::iota(idx.begin(), idx.end(), 0u);
  std::partial_sort(idx.begin(), idx.begin() + k, idx.end(),
                    [&](uint32_t a, uint32_t b) { return keys[a] != keys[b] ? keys[a] > keys[b] : a < b; });
  idx.resize(size_t(k));
  return idx;
}

}  // namespace

const KernelSpec& topk_postprocess_spec() {
  using K = ParamSpec::Kind;
  static const KernelSpec spec{
      .name = "topk_postprocess",
      .family = "detect",
      .description =
          "end-to-end post-process: top-K anchors, then top-K (anchor, class) pairs -> [B,K,6] sorted",
      .source = "detect/topk_postprocess.cu",
      .variants = {{"v1_radix_bitonic",
                    "CTA per image: radix-select the K-th key, bitonic-sort the K survivors"}},
      .params = {{"B", K::Int, "1", "batch size", 1, 65535},
                 {"A", K::Int, "8400", "anchors (8400 at 640x640)", 1, 1 << 22},
                 {"NC", K::Int, "80", "classes", 1, 4096},
                 {"MAX_DET", K::Int, "300", "max detections (K = min(MAX_DET, A) <= 1024)", 1, 1 << 22},
                 {"TIES", K::Bool, "false", "logits from 8 values only: most scores tie (index tie-break)"}},
      .entries = {"topk_anchor_keys", "topk_select"},
      .validate = [](const Params& p) {
        const int64_t k = std::min(param_int(p, "MAX_DET"), param_int(p, "A"));
        if (k > kMaxK)
          throw UsageError("parameter MAX_DET=" + p.at("MAX_DET") +
                           " of topk_postprocess is invalid: K = min(MAX_DET, A) must be at most 1024");
        if (param_int(p, "NC") * k > (int64_t(1) << 30))
          throw UsageError("parameter NC=" + p.at("NC") +
                           " of topk_postprocess is invalid: K * NC must be at most 2^30");
      }};
  return spec;
}

TopkPostprocessOp::TopkPostprocessOp(Backend& backend, int anchors, int num_classes, int max_det,
                                     int reserve_batch)
    : backend_(backend), anchors_(anchors), classes_(num_classes), k_(std::min(max_det, anchors)) {
  if (anchors < 1 || num_classes < 1 || max_det < 1)
    throw UsageError("topk_postprocess: anchors, classes and max_det must be positive (got " +
                     std::to_string(anchors) + ", " + std::to_string(num_classes) + ", " +
                     std::to_string(max_det) + ")");
  if (k_ > kMaxK)
    throw UsageError("topk_postprocess: K = min(max_det, anchors) = " + std::to_string(k_) + " exceeds " +
                     std::to_string(kMaxK));
  if (int64_t(k_) * num_classes > (int64_t(1) << 30))
    throw UsageError("topk_postprocess: K * classes = " + std::to_string(int64_t(k_) * num_classes) +
                     " is too large");
  module_ = backend.compile(topk_postprocess_spec().compile_request("v1_radix_bitonic", {}));
  anchor_keys_ = module_->kernel("topk_anchor_keys");
  select_ = module_->kernel("topk_select");
  reserve(reserve_batch);
}

void TopkPostprocessOp::reserve(int batch) {
  if (batch <= scratch_batch_) return;
  anchor_key_scratch_ = backend_.alloc_array<uint32_t>(size_t(batch) * anchors_);
  pair_key_scratch_ = backend_.alloc_array<uint32_t>(size_t(batch) * k_ * classes_);
  scratch_batch_ = batch;
}

void TopkPostprocessOp::run(int batch, const float* boxes, const float* logits, float* out) {
  if (batch < 1 || batch > 65535)
    throw UsageError("topk_postprocess: batch " + std::to_string(batch) + " is outside 1..65535");
  if (!boxes || !logits || !out) throw UsageError("topk_postprocess: null buffer");
  reserve(batch);
  unsigned* anchor_keys = anchor_key_scratch_.as<unsigned>();
  const TopkAnchorKeysParams keys{logits, anchor_keys, anchors_, classes_};
  backend_.launch(anchor_keys_, {{unsigned((anchors_ + 255) / 256), unsigned(batch), 1}, {256, 1, 1}},
                  kernel_params(keys));
  const TopkSelectParams select{boxes, logits,   anchor_keys, pair_key_scratch_.as<unsigned>(),
                                out,   anchors_, classes_,    k_};
  backend_.launch(select_, {{unsigned(batch), 1, 1}, {unsigned(kMaxK), 1, 1}}, kernel_params(select));
}

uint32_t topk_ranking_key(float logit) {
  uint32_t bits;
  std::memcpy(&bits, &logit, sizeof bits);
  return (bits & 0x80000000u) ? ~bits : (bits | 0x80000000u);
}

std::vector<double> topk_postprocess_reference(const std::vector<float>& boxes,
                                               const std::vector<float>& logits, int batch, int anchors,
                                               int classes, int max_det) {
  const int k = std::min(max_det, anchors);
  std::vector<double> out(size_t(batch) * k * 6);
  for (int b = 0; b < batch; ++b) {
    const float* lg = logits.data() + size_t(b) * classes * anchors;
    const float* bx = boxes.data() + size_t(b) * 4 * anchors;
    std::vector<uint32_t> anchor_keys(size_t(anchors), 0);
    for (int c = 0; c < classes; ++c)
      for (int a = 0; a < anchors; ++a)
        anchor_keys[a] = std::max(anchor_keys[a], topk_ranking_key(lg[size_t(c) * anchors + a]));
    const std::vector<uint32_t> best_anchors = top_indices(anchor_keys, k);
    std::vector<uint32_t> pair_keys(size_t(k) * classes);
    for (int r = 0; r < k; ++r)
      for (int c = 0; c < classes; ++c)
        pair_keys[size_t(r) * classes + c] = topk_ranking_key(lg[size_t(c) * anchors + best_anchors[r]]);
    const std::vector<uint32_t> best_pairs = top_indices(pair_keys, k);
    for (int r = 0; r < k; ++r) {
      const int cls = int(best_pairs[r] % classes), a = int(best_anchors[best_pairs[r] / classes]);
      const double cx = bx[a], cy = bx[anchors + a], w = bx[2 * size_t(anchors) + a],
                   h = bx[3 * size_t(anchors) + a];
      double* row = out.data() + (size_t(b) * k + r) * 6;
      row[0] = cx - w / 2;
      row[1] = cy - h / 2;
      row[2] = cx + w / 2;
      row[3] = cy + h / 2;
      row[4] = 1.0 / (1.0 + std::exp(-double(lg[size_t(cls) * anchors + a])));
      row[5] = cls;
    }
  }
  return out;
}

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
