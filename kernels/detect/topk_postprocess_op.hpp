// TopkPostprocessOp: YOLO26's end-to-end post-process (two-stage top-k, no NMS) on device buffers; kernels
// and ranking rule in topk_postprocess.cu. The op owns its scratch keys, sized for the largest batch
// reserved: run() grows them when a larger batch comes (an allocation), so reserve() before capturing a
// launch graph.
#pragma once
#include <memory>

#include "nvrtc_runtime/backend.hpp"

namespace lab {

inline constexpr const char* kTopkSource = "detect/topk_postprocess.cu";
inline constexpr const char* kTopkAnchorKeysKernel = "topk_anchor_keys";
inline constexpr const char* kTopkSelectKernel = "topk_select";
inline constexpr int kTopkMaxK = 1024;  // the select kernel's shared slots

// The module an op compiles (for compiling it ahead, beside other modules).
CompileRequest topk_compile_request();

class TopkPostprocessOp {
 public:
  // K = min(max_det, anchors); throws UsageError when K > 1024 or a size is not positive.
  TopkPostprocessOp(Backend& backend, int anchors, int num_classes, int max_det = 300, int reserve_batch = 1);
  // Allocates the scratch keys for batches up to `batch` (no-op when already large enough).
  void reserve(int batch);
  // boxes [B, 4, A] (cx, cy, w, h pixels), logits [B, nc, A] -> out [B, K, 6] (x1, y1, x2, y2, score, class).
  void run(int batch, const float* boxes, const float* logits, float* out);
  int k() const { return k_; }
  int anchors() const { return anchors_; }
  int num_classes() const { return classes_; }

 private:
  Backend& backend_;
  int anchors_, classes_, k_;
  std::shared_ptr<Module> module_;
  Kernel anchor_keys_, select_;
  int scratch_batch_ = 0;
  DeviceBuffer anchor_key_scratch_, pair_key_scratch_;
};

}  // namespace lab
