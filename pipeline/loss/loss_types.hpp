// The inputs, settings and results of the YOLO26 training loss (E2ELoss), shared by the kernel-dispatching
// loss (yolo26_loss.hpp) and the float64 reference (loss_reference.hpp).
#pragma once
#include <vector>

#include "kernels/detect/anchor_grid.hpp"
#include "kernels/loss/assign_types.hpp"

namespace lab::loss {

// Raw outputs of one detection head for a batch: box distances [B, 4, A] (l, t, r, b in grid units of the
// anchor's level) and class logits [B, nc, A].
struct HeadOutputs {
  std::vector<float> boxes;
  std::vector<float> scores;
};

struct LossBatch {
  int batch = 1;
  int num_classes = 80;
  int image_height = 640, image_width = 640;  // network input, pixels
  AnchorGrid anchors;                         // make_anchor_grid(image_height, image_width)
  HeadOutputs one2many, one2one;
  std::vector<std::vector<GtBox>> ground_truth;  // one list per image
};

struct LossConfig {
  double box_gain = 7.5, cls_gain = 0.5, l1_gain = 1.5;
  int epoch = 0, epochs = 100;
  AssignerSettings one2many{10, 10};
  AssignerSettings one2one{7, 1};
};

// o2m weight decays linearly from 0.8 at epoch 0 to 0.1 at epoch epochs-1 (then stays); o2o = 1 - o2m.
struct HeadWeights {
  double one2many = 0.8, one2one = 0.2;
};
HeadWeights epoch_weights(int epoch, int epochs);

// Per-head components after gains, per image as Ultralytics reports them (not multiplied by the batch size).
struct HeadLoss {
  double box = 0, cls = 0, l1 = 0;
  int positives = 0;            // anchors assigned to a gt in the whole batch
  double target_score_sum = 0;  // the normaliser, max(sum of target scores, 1)
  double sum() const { return box + cls + l1; }
};

// d total / d raw outputs, laid out like HeadOutputs.
template <class T>
struct HeadGradients {
  std::vector<T> boxes, scores;
};

template <class T>
struct LossResultT {
  HeadLoss one2many, one2one;
  HeadWeights weights;
  double total = 0;  // batch * (w_o2m * one2many.sum() + w_o2o * one2one.sum())
  HeadGradients<T> d_one2many, d_one2one;
};
using LossResult = LossResultT<float>;

// Throws UsageError when the sizes of the head outputs, anchors, and ground truth disagree, or a class
// index is out of range.
void validate_batch(const LossBatch& batch);
// The ground-truth part of it: one list per image of the batch, classes in [0, num_classes).
void validate_ground_truth(const std::vector<std::vector<GtBox>>& ground_truth, int batch, int num_classes);

}  // namespace lab::loss
