// The reference metrics of tests/reference_metrics.py on the same predictions and labels the metric code
// scores: pycocotools' COCOeval, and a numpy transcription of Ultralytics' formulas. The images are written
// as a COCO ground-truth document and a results list (boxes as coco_xywh gives them, full double precision),
// and the script runs with PYTHONPATH at the test-only folder where scripts/install-deps.sh installs
// pycocotools and numpy.
#pragma once
#include <filesystem>
#include <vector>

#include "pipeline/metrics/coco_eval.hpp"
#include "pipeline/metrics/ultralytics_metrics.hpp"

namespace lab::test {

struct ReferenceMetrics {
  metrics::CocoSummary coco;
  metrics::DetectionMetrics ultralytics;  // classes: cls, precision, recall, map50, map50_95 only
};

// REQUIREs that the script ran; `dir` receives gt.json and dt.json.
ReferenceMetrics reference_metrics(const std::vector<metrics::ImageEval>& images,
                                   const std::filesystem::path& dir);

}  // namespace lab::test
