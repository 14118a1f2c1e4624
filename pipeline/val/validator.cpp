// Validation over the detect stream: results matched back to their samples by file, then scored.
#include "pipeline/val/validator.hpp"

#include <map>

namespace lab::val {

namespace fs = std::filesystem;

std::vector<metrics::GroundTruth> truths_in_pixels(const std::vector<loss::YoloLabel>& labels, int width,
                                                   int height) {
  std::vector<metrics::GroundTruth> truths;
  for (const loss::YoloLabel& l : labels)
    truths.push_back({{(l.cx - l.w / 2) * width, (l.cy - l.h / 2) * height, (l.cx + l.w / 2) * width,
                       (l.cy + l.h / 2) * height},
                      l.cls});
  return truths;
}

std::vector<metrics::Prediction> predictions_of(const ImageDetections& image) {
  std::vector<metrics::Prediction> predictions;
  for (const Detection& d : image.detections)
    predictions.push_back({{d.x1, d.y1, d.x2, d.y2}, d.score, d.class_id});
  return predictions;
}

ValResult validate(const dataset::Split& split, const DetectStreamOptions& stream, const ValHooks& hooks) {
  ValResult result;
  result.report = split.report;
  std::vector<fs::path> files;
  std::map<std::string, const dataset::Sample*> by_file;
  for (const dataset::Sample& s : split.samples) {
    files.push_back(s.image);
    by_file[s.image.string()] = &s;
  }
  DetectStreamHooks detect;
  detect.make_detector = hooks.make_detector;
  detect.started = hooks.started;
  detect.save = [](Image&, const ImageDetections&) { return std::vector<FileWrite>{}; };
  detect.progress = hooks.progress;
  detect.finished = [&](const ImageDetections& image) {
    const dataset::Sample& sample = *by_file.at(image.file);
    result.evals.push_back(
        {predictions_of(image), truths_in_pixels(sample.labels, image.width, image.height)});
  };
  detect.skipped = [&](const std::string& file, const std::string& error) {
    result.report.note_undecodable(*by_file.at(file), error);
    if (hooks.warn) hooks.warn(result.report.warnings.back());
  };
  result.images = run_detect_stream(files, stream, detect);
  result.metrics = metrics::ultralytics_metrics(result.evals);
  result.coco = metrics::coco_map(result.evals);
  return result;
}

}  // namespace lab::val
