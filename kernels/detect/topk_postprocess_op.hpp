// TopkPostprocessOp: YOLO26's end-to-end post-process (two-stage top-k, no NMS; topk_postprocess.cu) on
// device arrays, compiled from the spec the runner is made from. The op owns its scratch keys, sized for the
// largest batch reserved: run() grows them when a larger batch comes (an allocation), so reserve() before
// capturing a launch graph.
#pragma once
#include <memory>

#include "kernels/kernel_spec.hpp"
#include "nvrtc_runtime/backend.hpp"

namespace lab {

const KernelSpec& topk_postprocess_spec();

class TopkPostprocessOp {
 public:
  // K = min(max_det, anchors); throws UsageError when K > 1024 or a size is not positive.
  TopkPostprocessOp(Backend& backend, int anchors, int num_classes, int max_det = 300, int reserve_batch = 1);
  // Allocates the scratch keys for batches up to `batch` (no-op when already large enough).
  void reserve(int batch);
  // boxes [B, 4, A] (cx, cy, w, h pixels), logits [B, nc, A] -> out [B, K, 6] (x1, y1, x2, y2, score, class).
  void run(int batch, const float* boxes, const float* logits, float* out);
  int k() const { return k_; }

 private:
  Backend& backend_;
  int anchors_, classes_, k_;
  std::shared_ptr<Module> module_;
  Kernel anchor_keys_, select_;
  int scratch_batch_ = 0;
  DeviceBuffer anchor_key_scratch_, pair_key_scratch_;
};

}  // namespace lab
