// COCO's bounding-box mAP as pycocotools' COCOeval computes it (evaluate + accumulate + summarize, area range
// "all", iscrowd 0), written here from that definition:
// - per image and class: predictions sorted by score (stable), the first `max_dets` kept; each in turn takes
//   the unmatched ground-truth box with the highest IoU at or above the threshold (a later box wins a tie);
//   IoU of [x, y, w, h] boxes as COCO's bbIou computes it (no epsilon);
// - per class with ground truth: the kept predictions of every image (in image order) sorted by score
//   (stable), recall and precision from the cumulative TP/FP, the precision envelope sampled at the 101
//   recall thresholds 0:0.01:1 (the first point whose recall reaches the threshold, 0 past the end);
// - mAP: the mean of those samples over thresholds, recall points and classes (classes without ground truth
//   left out). Where this differs from ultralytics_metrics.hpp is written in docs/val.md.
#pragma once
#include <vector>

#include "pipeline/metrics/eval_types.hpp"

namespace lab::metrics {

// COCO's [x, y, w, h] of a box: x1, y1, x2 - x1, y2 - y1 (the form written to COCO JSON and compared on).
std::array<double, 4> coco_xywh(const PixelBox& box);

struct CocoSummary {
  double map50_95 = 0, map50 = 0;  // -1 when no class has ground truth (COCOeval's convention)
};

CocoSummary coco_map(const std::vector<ImageEval>& images, int max_dets = 100);

}  // namespace lab::metrics
