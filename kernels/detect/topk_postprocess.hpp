// topk_postprocess (topk_postprocess.cu): YOLO26's end-to-end post-process (two-stage top-k, no NMS). Its
// spec (the runner's and the op's), the op and the float64 reference.
#pragma once
#include <cstdint>
#include <memory>
#include <vector>

#include "kernels/kernel_spec.hpp"
#include "nvrtc_runtime/backend.hpp"

namespace lab {

const KernelSpec& topk_postprocess_spec();

// Compiled once. The op owns its scratch keys, sized for the largest batch reserved: run() grows them when a
// larger batch comes (an allocation), so reserve() before capturing a launch graph.
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

// The reference is written from the two torch.topk calls of spec/yolo26.md with std::partial_sort,
// independently of the kernel. Ranking as the kernel documents it: a logit's IEEE bits mapped to an
// order-preserving integer (the score order), ties to the lower index (anchor index in stage 1, flat index
// rank * nc + class in stage 2).

// The order-preserving integer of a float's bits (larger float -> larger key; -0 just below +0).
uint32_t topk_ranking_key(float logit);

// boxes [B, 4, A] (cx, cy, w, h), logits [B, nc, A] -> [B, K, 6] rows x1, y1, x2, y2, sigmoid score, class;
// K = min(max_det, A).
std::vector<double> topk_postprocess_reference(const std::vector<float>& boxes,
                                               const std::vector<float>& logits, int batch, int anchors,
                                               int classes, int max_det);

}  // namespace lab
