// Detection metrics as Ultralytics' validator computes them (ultralytics/utils/metrics.py, 8.4), written
// here from that definition:
// - matching, per image and IoU threshold: each prediction picks the ground-truth box of its class with the
//   highest IoU at or above the threshold; of the predictions that picked one box, the one with the highest
//   score is a true positive, the others are false positives (they do not fall back to another box);
// - per class with ground truth, over all images: predictions sorted by score, cumulative TP/FP, recall =
//   TP / instances, precision = TP / (TP + FP); AP = the trapezoid integral, at 101 recall points 0:0.01:1,
//   of the precision envelope (interpolated linearly over [0, recall..., 1] x [1, precision..., 0]);
// - P and R: the precision and recall curves sampled at 1000 confidences 0..1 (numpy.interp), F1 averaged
//   over the classes and smoothed by a 101-point box filter; P and R per class at its argmax;
// - overall: the means over the classes that have ground truth (mAP50 = AP at IoU 0.5, mAP50-95 = AP averaged
//   over the ten thresholds).
// IoU is computed in float64 as inter / (area1 + area2 - inter + 1e-7); score ties keep the input order.
#pragma once
#include <vector>

#include "pipeline/metrics/eval_types.hpp"

namespace lab::metrics {

// True positives of one image's predictions (given sorted by score, highest first) at each IoU threshold.
std::vector<std::array<bool, kIouThresholdCount>> match_predictions(
    const std::vector<Prediction>& predictions, const std::vector<GroundTruth>& truths);

// Ultralytics' compute_ap: the 101-point trapezoid AP of one precision/recall curve (recall ascending).
double average_precision(const std::vector<double>& recall, const std::vector<double>& precision);

struct ClassMetrics {
  int cls = 0;
  size_t images = 0, instances = 0;  // images with at least one box of the class; its boxes
  double precision = 0, recall = 0, map50 = 0, map50_95 = 0;
  std::array<double, kIouThresholdCount> ap{};  // per IoU threshold
};

struct DetectionMetrics {
  size_t images = 0, instances = 0;
  double precision = 0, recall = 0, map50 = 0, map50_95 = 0;
  std::vector<ClassMetrics> classes;  // the classes with ground truth, in id order
};

DetectionMetrics ultralytics_metrics(const std::vector<ImageEval>& images);

}  // namespace lab::metrics
