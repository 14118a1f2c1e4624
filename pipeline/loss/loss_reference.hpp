// The float64 reference of the whole YOLO26 loss, written separately from Yolo26Loss: a literal, dense
// transcription of spec/yolo26.md (the assigner as [G, A] matrices step by step like the Ultralytics tensor
// code, the CIoU and its gradient derived by hand on xyxy boxes, BCE, L1). Slow and plain on purpose.
// The terms Ultralytics computes under no_grad (assignment, soft targets, the normaliser, the CIoU alpha)
// are split out as ReferenceDetached so a finite-difference check can hold them fixed.
#pragma once
#include <vector>

#include "pipeline/loss/loss_types.hpp"

namespace lab::loss {

struct ReferenceHead {
  std::vector<double> boxes, scores;  // [B, 4, A], [B, nc, A]
};
ReferenceHead to_reference(const HeadOutputs& head);

struct ReferenceDetached {
  std::vector<std::vector<int>> gt_of_anchor;     // [B][A]: assigned gt, -1 for background
  std::vector<std::vector<double>> target_score;  // [B][A]: soft target of the assigned gt's class
  std::vector<std::vector<double>> ciou_alpha;    // [B][A]: CIoU alpha of each positive
  double target_score_sum = 1;                    // max(sum of target scores, 1)
  int positives = 0;
};
ReferenceDetached reference_detached(const LossBatch& batch, const ReferenceHead& head,
                                     const AssignerSettings& settings);

struct ReferenceHeadResult {
  HeadLoss loss;                   // after gains, per image
  HeadGradients<double> gradient;  // d (grad_scale * loss.sum()) / d raw outputs, detached terms held fixed
};
ReferenceHeadResult reference_head_loss(const LossBatch& batch, const ReferenceHead& head,
                                        const ReferenceDetached& detached, const LossConfig& config,
                                        double grad_scale);

// Both heads, weighted by the epoch schedule, with the gradients of the total.
LossResultT<double> reference_loss(const LossBatch& batch, const LossConfig& config);

}  // namespace lab::loss
