// `lab val`: the detector over a dataset split through the detect stream (decode threads, batches, forward
// workers), each image's detections paired with its labels, then the metrics of pipeline/metrics/ (the
// Ultralytics numbers, and COCO's mAP beside them). Images that do not decode are skipped and counted as
// corrupt, like corrupt labels (pipeline/dataset/yolo_dataset.hpp).
#pragma once
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "pipeline/dataset/yolo_dataset.hpp"
#include "pipeline/detect/detect_stream.hpp"
#include "pipeline/metrics/coco_eval.hpp"
#include "pipeline/metrics/ultralytics_metrics.hpp"

namespace lab::val {

struct ValResult {
  dataset::SplitReport report;            // the split's, with the images that did not decode added
  std::vector<ImageDetections> images;    // in file order
  std::vector<metrics::ImageEval> evals;  // the same images' predictions and labels, in pixels
  metrics::DetectionMetrics metrics;      // as Ultralytics reports them
  metrics::CocoSummary coco;              // as COCOeval reports them (max 100 detections per class)
};

// Labels normalised to a width x height image -> boxes in its pixels.
std::vector<metrics::GroundTruth> truths_in_pixels(const std::vector<loss::YoloLabel>& labels, int width,
                                                   int height);
std::vector<metrics::Prediction> predictions_of(const ImageDetections& image);

struct ValHooks {
  std::function<std::unique_ptr<Detector>(int worker)> make_detector;
  std::function<void()> started;  // every detector exists; the images follow
  std::function<void(const std::string& line)> warn;  // an image skipped because it does not decode
  std::function<void(size_t index, size_t total, const std::string& file)> progress;
};

// Runs every sample of `split` through the stream (`stream.detector` holds the letterbox and conf); the
// stream's save stage is not used.
ValResult validate(const dataset::Split& split, const DetectStreamOptions& stream, const ValHooks& hooks);

}  // namespace lab::val
