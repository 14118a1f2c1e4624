// The topk_postprocess spec, and its op: compile once, size the scratch per batch, two launches per call.
#include "kernels/detect/topk_postprocess_op.hpp"

#include <algorithm>
#include <string>

#include "kernels/detect/topk_postprocess_params.cuh"
#include "nvrtc_runtime/errors.hpp"

namespace lab {
namespace {

constexpr int kMaxK = 1024;  // the select kernel's shared slots

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

}  // namespace lab
