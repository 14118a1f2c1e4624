// The metric code against tests/reference_metrics.py on the same predictions and labels: COCO's mAP50-95 and
// mAP50 against pycocotools' COCOeval, and the Ultralytics numbers (P, R, mAP50, mAP50-95, overall and per
// class) against a numpy transcription of Ultralytics' formulas. Seeded random scenes with jittered,
// duplicated and wrong-class predictions, images without labels or without predictions, and an image with
// more than COCOeval's maxDets (100) predictions of one class. Both sides compute the same float64
// operations, so they agree to rounding; the two definitions differ from each other (docs/val.md), as the
// scenes show.
#include <catch2/catch.hpp>

#include <random>

#include "pipeline/metrics/coco_eval.hpp"
#include "pipeline/metrics/ultralytics_metrics.hpp"
#include "tests/reference_metrics_support.hpp"
#include "tests/test_helpers.hpp"

using namespace lab::metrics;

namespace {

std::vector<ImageEval> random_scene(uint32_t seed, int image_count, int classes) {
  std::mt19937 random(seed);
  auto uniform = [&](double low, double high) {
    return std::uniform_real_distribution<double>(low, high)(random);
  };
  auto integer = [&](int low, int high) { return std::uniform_int_distribution<int>(low, high)(random); };
  std::vector<ImageEval> images(static_cast<size_t>(image_count));
  for (ImageEval& image : images) {
    const int truths = integer(0, 6);
    for (int k = 0; k < truths; ++k) {
      const double x = uniform(0, 500), y = uniform(0, 400), w = uniform(8, 150), h = uniform(8, 150);
      image.truths.push_back({{x, y, x + w, y + h}, integer(0, classes - 1)});
    }
    for (const GroundTruth& g : image.truths) {
      const int copies = integer(0, 2);  // missed, found, or found twice
      for (int c = 0; c < copies; ++c) {
        const double w = g.box.x2 - g.box.x1, h = g.box.y2 - g.box.y1, jitter = uniform(0, 0.3);
        const PixelBox box{g.box.x1 + uniform(-jitter, jitter) * w, g.box.y1 + uniform(-jitter, jitter) * h,
                           g.box.x2 + uniform(-jitter, jitter) * w, g.box.y2 + uniform(-jitter, jitter) * h};
        const int cls = integer(0, 9) == 0 ? integer(0, classes - 1) : g.cls;  // now and then the wrong class
        image.predictions.push_back({box, uniform(0, 1), cls});
      }
    }
    const int false_positives = integer(0, 4);
    for (int k = 0; k < false_positives; ++k) {
      const double x = uniform(0, 500), y = uniform(0, 400);
      image.predictions.push_back(
          {{x, y, x + uniform(5, 100), y + uniform(5, 100)}, uniform(0, 1), integer(0, classes - 1)});
    }
  }
  return images;
}

}  // namespace

TEST_CASE("metrics: COCO mAP equals pycocotools' COCOeval, Ultralytics' numbers their numpy transcription",
          "[metrics][pycocotools]") {
  lab::test::ScratchDir dir("coco-eval");
  for (uint32_t seed : {1u, 2u, 3u}) {
    std::vector<ImageEval> images = random_scene(seed, 40, 4);
    if (seed == 3) {  // more than maxDets predictions of one class in one image: only the best 100 count
      std::mt19937 random(seed);
      for (int k = 0; k < 150; ++k) {
        const double x = std::uniform_real_distribution<double>(0, 400)(random);
        images[0].predictions.push_back(
            {{x, x, x + 60, x + 50}, std::uniform_real_distribution<double>(0, 1)(random), 1});
      }
      images[0].truths.push_back({{100, 100, 160, 150}, 1});
    }
    const CocoSummary ours = coco_map(images);
    const DetectionMetrics ultralytics = ultralytics_metrics(images);
    const lab::test::ReferenceMetrics reference = lab::test::reference_metrics(images, dir.path);
    INFO("seed " << seed << ": COCO mAP50-95 " << ours.map50_95 << " (pycocotools " << reference.coco.map50_95
                 << "), mAP50 " << ours.map50 << " (" << reference.coco.map50 << "); Ultralytics' definition "
                 << ultralytics.map50_95 << " (numpy " << reference.ultralytics.map50_95 << "), "
                 << ultralytics.map50 << " (" << reference.ultralytics.map50 << ")");
    CHECK(ours.map50_95 > 0.1);  // a scene with something to find and something to miss
    CHECK(ours.map50_95 < 0.9);
    CHECK(ours.map50_95 == Approx(reference.coco.map50_95).margin(1e-12));
    CHECK(ours.map50 == Approx(reference.coco.map50).margin(1e-12));
    CHECK(ultralytics.precision == Approx(reference.ultralytics.precision).margin(1e-9));
    CHECK(ultralytics.recall == Approx(reference.ultralytics.recall).margin(1e-9));
    CHECK(ultralytics.map50 == Approx(reference.ultralytics.map50).margin(1e-9));
    CHECK(ultralytics.map50_95 == Approx(reference.ultralytics.map50_95).margin(1e-9));
    REQUIRE(ultralytics.classes.size() == reference.ultralytics.classes.size());
    for (size_t c = 0; c < ultralytics.classes.size(); ++c) {
      CHECK(ultralytics.classes[c].cls == reference.ultralytics.classes[c].cls);
      CHECK(ultralytics.classes[c].precision ==
            Approx(reference.ultralytics.classes[c].precision).margin(1e-9));
      CHECK(ultralytics.classes[c].recall == Approx(reference.ultralytics.classes[c].recall).margin(1e-9));
      CHECK(ultralytics.classes[c].map50_95 ==
            Approx(reference.ultralytics.classes[c].map50_95).margin(1e-9));
    }
  }
}
