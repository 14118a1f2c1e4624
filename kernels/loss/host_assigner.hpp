// Task-aligned assignment (Ultralytics TaskAlignedAssigner as spec/yolo26.md states it) for one image, on the
// host. Works per ground-truth box on its candidate anchors (centres inside the STAL-widened box), so the
// cost is the candidates' CIoU, not a dense [G, A] matrix; the device assigner (tal_assign.cu) is checked
// against it.
#pragma once
#include <vector>

#include "kernels/loss/assign_types.hpp"

namespace lab::loss {

struct Positive {
  int anchor = 0;
  int gt = 0;
  double score = 0;  // target score of the gt's class: align * max_iou_of_gt / (max_align_of_gt + eps)
};

// One image's raw outputs: box distances [4, A] and class logits [nc, A] (views into a batch).
struct ImageHead {
  const float* boxes = nullptr;
  const float* logits = nullptr;
  int num_classes = 0;
};

// Positives sorted by anchor. Anchors whose alignment metric is exactly 0 never become positives (see
// docs/loss.md: they would carry target score 0 and weight 0, and torch.topk orders such ties arbitrarily).
// Ties in the top-k and in the conflict resolution go to the lower anchor / gt index.
std::vector<Positive> assign_image(const AnchorGrid& anchors, const ImageHead& head,
                                   const std::vector<GtBox>& gts, const AssignerSettings& settings);

}  // namespace lab::loss
