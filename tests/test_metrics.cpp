// The detection metrics against hand-computed small cases (tests/test_metrics_coco.cpp checks the COCO
// definition against pycocotools): numpy.interp and the 101-point trapezoid AP, Ultralytics' matching (no
// fall-back to a second box) against COCO's (the next best unmatched box), P and R at the max-F1 confidence,
// per-class rows for the classes with labels only.
#include <catch2/catch.hpp>

#include "pipeline/metrics/coco_eval.hpp"
#include "pipeline/metrics/curve_math.hpp"
#include "pipeline/metrics/ultralytics_metrics.hpp"

using namespace lab::metrics;

namespace {

Prediction predicted(double x1, double y1, double x2, double y2, double score, int cls = 0) {
  return {{x1, y1, x2, y2}, score, cls};
}
GroundTruth truth(double x1, double y1, double x2, double y2, int cls = 0) {
  return {{x1, y1, x2, y2}, cls};
}

}  // namespace

TEST_CASE("metrics: numpy.interp and the trapezoid rule", "[metrics]") {
  const std::vector<double> xp{0, 0.5, 0.5, 1}, fp{1, 1, 0.25, 0};
  CHECK(interp(-1, xp, fp, 7) == 7);        // left of the first point
  CHECK(interp(0.25, xp, fp, 7) == 1);      // inside the first segment
  CHECK(interp(0.5, xp, fp, 7) == 0.25);    // on a repeated point: its last value
  CHECK(interp(0.75, xp, fp, 7) == 0.125);  // linear
  CHECK(interp(2, xp, fp, 7) == 0);         // right of the last point: its value
  CHECK(trapezoid({0, 1, 1}, {0, 1, 3}) == 2.5);
  CHECK(iou_thresholds()[0] == 0.5);
  CHECK(iou_thresholds()[9] == 0.95);
  CHECK(iou_thresholds()[3] == Approx(0.65).margin(1e-15));
}

TEST_CASE("metrics: AP of one curve by hand, Ultralytics' and COCO's", "[metrics]") {
  // Two boxes; predictions 0.9 (exact), 0.8 (nowhere near), 0.7 (exact): recall 1/2, 1/2, 1, precision 1,
  // 1/2, 2/3, the same at every IoU threshold.
  // Ultralytics: envelope 1 on recall [0, 0.5), 2/3 from 0.5 to the last point before 1, 0 at 1; trapezoid
  // at 0:0.01:1 = 0.49 + 0.01 (1 + 2/3) / 2 + 0.49 (2/3) + 0.01 (2/3) / 2 = 0.828333...
  // COCO: 51 recall points <= 0.5 at precision 1, 50 above at 2/3: (51 + 50 * 2/3) / 101.
  const std::vector<ImageEval> images = {
      {{predicted(0, 0, 10, 10, 0.9)}, {truth(0, 0, 10, 10)}},
      {{predicted(50, 50, 60, 60, 0.8), predicted(0, 0, 10, 10, 0.7)}, {truth(0, 0, 10, 10)}}};
  const double ultralytics_ap = 0.49 + 0.01 * (1 + 2.0 / 3) / 2 + 0.49 * 2 / 3 + 0.01 * (2.0 / 3) / 2;
  CHECK(average_precision({0.5, 0.5, 1}, {1, 0.5, 2.0 / 3}) == Approx(ultralytics_ap).epsilon(1e-12));
  const DetectionMetrics m = ultralytics_metrics(images);
  CHECK(m.images == 2);
  CHECK(m.instances == 2);
  CHECK(m.map50 == Approx(ultralytics_ap).epsilon(1e-12));
  CHECK(m.map50_95 == Approx(ultralytics_ap).epsilon(1e-12));
  // F1 is highest (0.8) for every confidence below 0.7, where P = 2/3 and R = 1; the smoothed curve's
  // argmax is its first point.
  CHECK(m.precision == Approx(2.0 / 3).epsilon(1e-12));
  CHECK(m.recall == Approx(1).epsilon(1e-12));
  const CocoSummary coco = coco_map(images);
  CHECK(coco.map50 == Approx((51 + 50 * 2.0 / 3) / 101).epsilon(1e-12));
  CHECK(coco.map50_95 == Approx((51 + 50 * 2.0 / 3) / 101).epsilon(1e-12));
}

TEST_CASE("metrics: Ultralytics' matching does not fall back to a second box, COCO's does", "[metrics]") {
  // g0 = [0,0,10,10], g1 = [0,2,10,12]; p0 (0.9) sits on g0; p1 (0.8) overlaps g0 by 95/105 and g1 by 85/115
  // (0.739). Ultralytics: p1 picks g0, which p0 holds, so it is a false positive at every threshold. COCO: p1
  // takes g1 while 0.739 reaches the threshold (0.50 to 0.70), and is a false positive from 0.75 on.
  const std::vector<GroundTruth> truths = {truth(0, 0, 10, 10), truth(0, 2, 10, 12)};
  const std::vector<Prediction> predictions = {predicted(0, 0, 10, 10, 0.9),
                                               predicted(0, 0.5, 10, 10.5, 0.8)};
  const auto correct = match_predictions(predictions, truths);
  for (int t = 0; t < kIouThresholdCount; ++t) {
    CHECK(correct[0][size_t(t)]);
    CHECK_FALSE(correct[1][size_t(t)]);
  }
  const std::vector<ImageEval> images = {{predictions, truths}};
  // Ultralytics: recall 1/2, 1/2 and precision 1, 1/2 at every threshold: envelope 1 below recall 0.5, 0.5 at
  // 0.5, then the line from (0.5, 0.5) to (1, 0): 0.49 + 0.01 (1 + 0.5) / 2 + 0.125.
  const DetectionMetrics m = ultralytics_metrics(images);
  CHECK(m.map50 == Approx(0.49 + 0.0075 + 0.125).epsilon(1e-12));
  CHECK(m.map50_95 == Approx(0.6225).epsilon(1e-12));
  // COCO: AP 1 at the five thresholds up to 0.70, 51/101 at the five from 0.75.
  const CocoSummary coco = coco_map(images);
  CHECK(coco.map50 == Approx(1).epsilon(1e-12));
  CHECK(coco.map50_95 == Approx((5 + 5 * 51.0 / 101) / 10).epsilon(1e-12));
}

TEST_CASE("metrics: at each threshold, of the predictions that picked one box the highest score wins",
          "[metrics]") {
  // p0 (0.9) overlaps g by 0.81, p1 (0.6) covers it exactly. Up to 0.80 both pick g and p0, the higher score,
  // is the true positive; from 0.85 only p1 reaches the threshold and takes g.
  const std::vector<GroundTruth> truths = {truth(0, 0, 10, 10)};
  const std::vector<Prediction> sorted = {predicted(0, 0, 9, 9, 0.9), predicted(0, 0, 10, 10, 0.6)};
  const auto correct = match_predictions(sorted, truths);
  for (int t = 0; t < kIouThresholdCount; ++t) {
    INFO("threshold " << iou_thresholds()[size_t(t)]);
    CHECK(correct[0][size_t(t)] == (t <= 6));
    CHECK(correct[1][size_t(t)] == (t >= 7));
  }
}

TEST_CASE("metrics: per-class rows for classes with labels, a class never predicted scores 0", "[metrics]") {
  // Class 0: one box found exactly. Class 1: two boxes (in two images), never predicted. Class 5: predicted,
  // no labels (left out of every mean).
  const std::vector<ImageEval> images = {
      {{predicted(0, 0, 10, 10, 0.9, 0), predicted(20, 20, 30, 30, 0.5, 5)},
       {truth(0, 0, 10, 10, 0), truth(40, 40, 50, 50, 1)}},
      {{}, {truth(0, 0, 10, 10, 1)}}};
  const DetectionMetrics m = ultralytics_metrics(images);
  REQUIRE(m.classes.size() == 2);
  CHECK(m.classes[0].cls == 0);
  CHECK(m.classes[0].images == 1);
  CHECK(m.classes[0].instances == 1);
  CHECK(m.classes[0].map50_95 == Approx(0.995).epsilon(1e-12));  // a perfect class: 0.99 + 0.01 (1 + 0) / 2
  CHECK(m.classes[0].precision == Approx(1).epsilon(1e-12));
  CHECK(m.classes[0].recall == Approx(1).epsilon(1e-12));
  CHECK(m.classes[1].cls == 1);
  CHECK(m.classes[1].images == 2);
  CHECK(m.classes[1].instances == 2);
  CHECK(m.classes[1].map50 == 0);
  CHECK(m.classes[1].precision == 0);
  CHECK(m.classes[1].recall == 0);
  CHECK(m.instances == 3);
  CHECK(m.map50 == Approx(0.4975).epsilon(1e-12));
  CHECK(m.precision == Approx(0.5).epsilon(1e-12));
  CHECK(m.recall == Approx(0.5).epsilon(1e-12));
  CHECK(coco_map(images).map50_95 == Approx(0.5).epsilon(1e-12));        // COCO: 1 for a perfect class
  CHECK(coco_map({{{predicted(0, 0, 1, 1, 0.5)}, {}}}).map50_95 == -1);  // no labels at all: COCO's -1
}
