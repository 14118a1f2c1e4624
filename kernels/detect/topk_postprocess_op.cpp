// TopkPostprocessOp: compile once, size the scratch per batch, two launches per call.
#include "kernels/detect/topk_postprocess_op.hpp"

#include <algorithm>
#include <string>

#include "nvrtc_runtime/errors.hpp"

namespace lab {

CompileRequest topk_compile_request() {
  return CompileRequest{kTopkSource, {}, {kTopkAnchorKeysKernel, kTopkSelectKernel}};
}

TopkPostprocessOp::TopkPostprocessOp(Backend& backend, int anchors, int num_classes, int max_det,
                                     int reserve_batch)
    : backend_(backend), anchors_(anchors), classes_(num_classes), k_(std::min(max_det, anchors)) {
  if (anchors < 1 || num_classes < 1 || max_det < 1)
    throw UsageError("topk_postprocess: anchors, classes and max_det must be positive (got " +
                     std::to_string(anchors) + ", " + std::to_string(num_classes) + ", " +
                     std::to_string(max_det) + ")");
  if (k_ > kTopkMaxK)
    throw UsageError("topk_postprocess: K = min(max_det, anchors) = " + std::to_string(k_) + " exceeds " +
                     std::to_string(kTopkMaxK));
  if (int64_t(k_) * num_classes > (int64_t(1) << 30))
    throw UsageError("topk_postprocess: K * classes = " + std::to_string(int64_t(k_) * num_classes) +
                     " is too large");
  module_ = backend.compile(topk_compile_request());
  anchor_keys_ = module_->kernel(kTopkAnchorKeysKernel);
  select_ = module_->kernel(kTopkSelectKernel);
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
  unsigned* pair_keys = pair_key_scratch_.as<unsigned>();
  int a = anchors_, nc = classes_, k = k_;
  LaunchConfig keys_cfg;
  keys_cfg.grid = {unsigned((a + 255) / 256), unsigned(batch), 1};
  keys_cfg.block = {256, 1, 1};
  backend_.launch(anchor_keys_, keys_cfg, kernel_args(logits, a, nc, anchor_keys));
  LaunchConfig select_cfg;
  select_cfg.grid = {unsigned(batch), 1, 1};
  select_cfg.block = {unsigned(kTopkMaxK), 1, 1};
  backend_.launch(select_, select_cfg, kernel_args(boxes, logits, anchor_keys, pair_keys, a, nc, k, out));
}

}  // namespace lab
