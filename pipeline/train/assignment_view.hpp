// The loss's task-aligned assignment made visible: for one image, its labels and a model, the forward of both
// heads and the device assignment of each (TalAssignOp, the kernels Yolo26Loss's device path runs, with the
// loss's settings: one-to-many topk 10, one-to-one topk 7 / topk2 1), regrouped per ground-truth box: which
// anchors are its positives, where their centres lie in the input, their level, alignment metric, IoU term
// and target score. The viewer's Train panel draws it; a loss or assignment bug shows as missing, misplaced
// or foreign anchors.
#pragma once
#include <vector>

#include "nvrtc_runtime/backend.hpp"
#include "pipeline/loss/loss_types.hpp"
#include "pipeline/model/yolo26_model.hpp"

namespace lab::train {

// One positive anchor of a ground-truth box.
struct PositiveAnchor {
  int anchor = 0;  // index into the anchor grid (levels P3, P4, P5 concatenated)
  int level = 0, stride = 0;
  double x = 0, y = 0;  // the anchor centre in input pixels
  double align = 0;     // the alignment metric sigmoid(logit)^alpha * overlap^beta
  double overlap = 0;   // max(CIoU(gt, predicted box), 0): the IoU term of the metric
  double score = 0;     // the target score of the gt's class: align * max overlap / max align of the gt
};

struct BoxAssignment {
  loss::GtBox box;                                // xyxy pixels in the input
  std::vector<PositiveAnchor> one2many, one2one;  // by anchor index
};

struct AssignmentView {
  int height = 0, width = 0;         // the network input
  std::vector<BoxAssignment> boxes;  // in the order of the ground truth
  int one2many_positives = 0, one2one_positives = 0;
};

// Raw outputs of both heads for one image: boxes [1, 4, A], logits [1, nc, A].
struct ImageHeads {
  loss::HeadOutputs one2many, one2one;
  int num_classes = 0;
};

// The heads of `model` on `input` [1, 3, height, width] (letterboxed, 0..1) by the float64 reference forward.
// UsageError when the model has no one-to-many head or the size is not a multiple of the largest stride.
ImageHeads forward_heads(const Yolo26Model& model, const std::vector<float>& input, int height, int width);

// Both heads' assignments on `backend`'s tal_assign kernels with config's settings. UsageError when the
// sizes disagree or a class is out of range.
AssignmentView assign_heads(Backend& backend, const ImageHeads& heads, int height, int width,
                            const std::vector<loss::GtBox>& ground_truth, const loss::LossConfig& config);

// forward_heads, then assign_heads.
AssignmentView assignment_view(Backend& backend, const Yolo26Model& model, const std::vector<float>& input,
                               int height, int width, const std::vector<loss::GtBox>& ground_truth,
                               const loss::LossConfig& config);

}  // namespace lab::train
