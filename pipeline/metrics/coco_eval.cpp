// COCOeval's evaluateImg and accumulate for bounding boxes, area "all", no crowd boxes (the definition is in
// the header).
#include "pipeline/metrics/coco_eval.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <set>

namespace lab::metrics {
namespace {

// pycocotools' bbIou (maskApi.c) for one pair, in the same operation order.
double coco_iou(const std::array<double, 4>& d, const std::array<double, 4>& g) {
  const double da = d[2] * d[3], ga = g[2] * g[3];
  const double w = std::fmin(d[2] + d[0], g[2] + g[0]) - std::fmax(d[0], g[0]);
  if (w <= 0) return 0;
  const double h = std::fmin(d[3] + d[1], g[3] + g[1]) - std::fmax(d[1], g[1]);
  if (h <= 0) return 0;
  const double i = w * h;
  return i / (da + ga - i);
}

// One image's kept predictions of one class: score and whether each matched, per IoU threshold.
struct MatchedDetections {
  std::vector<double> scores;
  std::vector<std::array<bool, kIouThresholdCount>> matched;
};

MatchedDetections evaluate_image(const ImageEval& image, int cls, int max_dets) {
  std::vector<std::array<double, 4>> dts, gts;
  std::vector<double> scores;
  std::vector<const Prediction*> own;
  for (const Prediction& p : image.predictions)
    if (p.cls == cls) own.push_back(&p);
  std::stable_sort(own.begin(), own.end(),
                   [](const Prediction* a, const Prediction* b) { return a->score > b->score; });
  if (own.size() > size_t(max_dets)) own.resize(size_t(max_dets));
  for (const Prediction* p : own) {
    dts.push_back(coco_xywh(p->box));
    scores.push_back(p->score);
  }
  for (const GroundTruth& g : image.truths)
    if (g.cls == cls) gts.push_back(coco_xywh(g.box));
  MatchedDetections result{scores, std::vector<std::array<bool, kIouThresholdCount>>(dts.size())};
  for (auto& row : result.matched) row.fill(false);
  for (int t = 0; t < kIouThresholdCount; ++t) {
    std::vector<bool> gt_matched(gts.size(), false);
    for (size_t d = 0; d < dts.size(); ++d) {
      double best = std::min(iou_thresholds()[size_t(t)], 1 - 1e-10);
      long m = -1;
      for (size_t g = 0; g < gts.size(); ++g) {
        if (gt_matched[g]) continue;
        const double iou = coco_iou(dts[d], gts[g]);
        if (iou < best) continue;
        best = iou;
        m = long(g);
      }
      if (m < 0) continue;
      gt_matched[size_t(m)] = true;
      result.matched[d][size_t(t)] = true;
    }
  }
  return result;
}

}  // namespace

std::array<double, 4> coco_xywh(const PixelBox& box) {
  return {box.x1, box.y1, box.x2 - box.x1, box.y2 - box.y1};
}

CocoSummary coco_map(const std::vector<ImageEval>& images, int max_dets) {
  std::set<int> classes;
  for (const ImageEval& image : images)
    for (const GroundTruth& g : image.truths) classes.insert(g.cls);
  const std::vector<double> recall_thresholds = linspace(0, 1, 101);
  double sum_all = 0, sum_50 = 0;
  size_t count_all = 0, count_50 = 0;
  for (int cls : classes) {
    std::vector<double> scores;
    std::vector<std::array<bool, kIouThresholdCount>> matched;
    size_t truths = 0;
    for (const ImageEval& image : images) {
      MatchedDetections one = evaluate_image(image, cls, max_dets);
      scores.insert(scores.end(), one.scores.begin(), one.scores.end());
      matched.insert(matched.end(), one.matched.begin(), one.matched.end());
      for (const GroundTruth& g : image.truths) truths += g.cls == cls;
    }
    std::vector<size_t> order(scores.size());
    for (size_t i = 0; i < order.size(); ++i) order[i] = i;
    std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return -scores[a] < -scores[b]; });
    for (int t = 0; t < kIouThresholdCount; ++t) {
      std::vector<double> rc, pr;
      double tp = 0, fp = 0;
      for (size_t i : order) {
        (matched[i][size_t(t)] ? tp : fp) += 1;
        rc.push_back(tp / double(truths));
        pr.push_back(tp / (fp + tp + std::numeric_limits<double>::epsilon()));
      }
      for (size_t i = pr.size(); i-- > 1;)
        if (pr[i] > pr[i - 1]) pr[i - 1] = pr[i];
      for (double r : recall_thresholds) {
        const size_t at = size_t(std::lower_bound(rc.begin(), rc.end(), r) - rc.begin());
        const double q = at < pr.size() ? pr[at] : 0.0;
        sum_all += q;
        ++count_all;
        if (t == 0) {
          sum_50 += q;
          ++count_50;
        }
      }
    }
  }
  if (count_all == 0) return {-1, -1};
  return {sum_all / double(count_all), sum_50 / double(count_50)};
}

}  // namespace lab::metrics
