// What the detection metrics take: per image, the predictions (box, score, class) and the ground-truth boxes,
// in one pixel frame (the source image's, as Ultralytics' validator and COCO evaluate); and the ten IoU
// thresholds 0.50:0.05:0.95 with the values numpy.linspace(0.5, 0.95, 10) gives.
#pragma once
#include <array>
#include <cstddef>
#include <vector>

namespace lab::metrics {

struct PixelBox {
  double x1 = 0, y1 = 0, x2 = 0, y2 = 0;
};

struct Prediction {
  PixelBox box;
  double score = 0;
  int cls = 0;
};

struct GroundTruth {
  PixelBox box;
  int cls = 0;
};

struct ImageEval {
  std::vector<Prediction> predictions;  // any order
  std::vector<GroundTruth> truths;
};

constexpr int kIouThresholdCount = 10;
// 0.5, 0.55, ..., 0.95: i * ((0.95 - 0.5) / 9) + 0.5, the last exactly 0.95 (numpy.linspace).
const std::array<double, kIouThresholdCount>& iou_thresholds();

// numpy.linspace(start, stop, count) element by element.
std::vector<double> linspace(double start, double stop, int count);

}  // namespace lab::metrics
