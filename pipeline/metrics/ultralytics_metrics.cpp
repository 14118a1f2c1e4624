// Ultralytics' match_predictions, ap_per_class and compute_ap (the definitions are in the header).
#include "pipeline/metrics/ultralytics_metrics.hpp"

#include <algorithm>
#include <cmath>
#include <map>
#include <numeric>
#include <set>

#include "pipeline/metrics/curve_math.hpp"

namespace lab::metrics {
namespace {

constexpr double kIouEps = 1e-7;  // box_iou's
constexpr double kEps = 1e-16;    // ap_per_class's
constexpr int kCurvePoints = 1000;

double ultralytics_iou(const PixelBox& a, const PixelBox& b) {
  const double iw = std::max(0.0, std::min(a.x2, b.x2) - std::max(a.x1, b.x1));
  const double ih = std::max(0.0, std::min(a.y2, b.y2) - std::max(a.y1, b.y1));
  const double inter = iw * ih;
  return inter / ((a.x2 - a.x1) * (a.y2 - a.y1) + (b.x2 - b.x1) * (b.y2 - b.y1) - inter + kIouEps);
}

struct ScoredPrediction {
  double score;
  int cls;
  std::array<bool, kIouThresholdCount> tp;
};

// A moving average over 101 points with the ends repeated (Ultralytics' smooth(y, 0.1) for 1000 points).
std::vector<double> smooth(const std::vector<double>& y) {
  const int filter = int(std::lround(double(y.size()) * 0.1 * 2)) / 2 + 1;  // odd: 101 for 1000 points
  const int half = filter / 2;
  std::vector<double> padded(size_t(half), y.front());
  padded.insert(padded.end(), y.begin(), y.end());
  padded.insert(padded.end(), size_t(half), y.back());
  std::vector<double> out(y.size());
  const double weight = 1.0 / filter;
  for (size_t k = 0; k < y.size(); ++k) {
    double sum = 0;
    for (int m = 0; m < filter; ++m) sum += padded[k + size_t(m)] * weight;
    out[k] = sum;
  }
  return out;
}

}  // namespace

std::vector<std::array<bool, kIouThresholdCount>> match_predictions(
    const std::vector<Prediction>& predictions, const std::vector<GroundTruth>& truths) {
  std::vector<std::array<bool, kIouThresholdCount>> correct(predictions.size());
  for (auto& row : correct) row.fill(false);
  std::vector<std::vector<double>> iou(predictions.size(), std::vector<double>(truths.size(), 0.0));
  for (size_t p = 0; p < predictions.size(); ++p)
    for (size_t l = 0; l < truths.size(); ++l)
      if (predictions[p].cls == truths[l].cls) iou[p][l] = ultralytics_iou(predictions[p].box, truths[l].box);
  for (int t = 0; t < kIouThresholdCount; ++t) {
    const double threshold = iou_thresholds()[size_t(t)];
    std::vector<bool> taken(truths.size(), false);
    for (size_t p = 0; p < predictions.size(); ++p) {
      long best = -1;
      for (size_t l = 0; l < truths.size(); ++l)
        if (iou[p][l] >= threshold && (best < 0 || iou[p][l] > iou[p][size_t(best)])) best = long(l);
      if (best < 0 || taken[size_t(best)]) continue;
      taken[size_t(best)] = true;
      correct[p][size_t(t)] = true;
    }
  }
  return correct;
}

double average_precision(const std::vector<double>& recall, const std::vector<double>& precision) {
  std::vector<double> mrec{0.0}, mpre{1.0};
  mrec.insert(mrec.end(), recall.begin(), recall.end());
  mpre.insert(mpre.end(), precision.begin(), precision.end());
  mrec.push_back(1.0);
  mpre.push_back(0.0);
  for (size_t i = mpre.size() - 1; i-- > 0;) mpre[i] = std::max(mpre[i], mpre[i + 1]);
  const std::vector<double> x = linspace(0, 1, 101);
  std::vector<double> y(x.size());
  for (size_t i = 0; i < x.size(); ++i) y[i] = interp(x[i], mrec, mpre, mpre.front());
  return trapezoid(y, x);
}

DetectionMetrics ultralytics_metrics(const std::vector<ImageEval>& images) {
  DetectionMetrics result;
  result.images = images.size();
  std::vector<ScoredPrediction> all;
  std::map<int, ClassMetrics> classes;  // the classes with ground truth
  for (const ImageEval& image : images) {
    std::vector<Prediction> sorted = image.predictions;
    std::stable_sort(sorted.begin(), sorted.end(),
                     [](const Prediction& a, const Prediction& b) { return a.score > b.score; });
    const auto tp = match_predictions(sorted, image.truths);
    for (size_t p = 0; p < sorted.size(); ++p) all.push_back({sorted[p].score, sorted[p].cls, tp[p]});
    std::set<int> present;
    for (const GroundTruth& g : image.truths) {
      ClassMetrics& c = classes[g.cls];
      c.cls = g.cls;
      ++c.instances;
      present.insert(g.cls);
    }
    for (int cls : present) ++classes[cls].images;
    result.instances += image.truths.size();
  }
  std::stable_sort(all.begin(), all.end(),
                   [](const ScoredPrediction& a, const ScoredPrediction& b) { return a.score > b.score; });

  const std::vector<double> px = linspace(0, 1, kCurvePoints);
  std::vector<std::vector<double>> p_curve, r_curve;
  for (auto& [cls, metrics] : classes) {
    std::vector<double> p_row(px.size(), 0.0), r_row(px.size(), 0.0);
    std::vector<double> negated_conf;  // -score, ascending
    std::array<std::vector<double>, kIouThresholdCount> recall, precision;
    std::array<double, kIouThresholdCount> tpc{}, fpc{};
    for (const ScoredPrediction& s : all) {
      if (s.cls != cls) continue;
      negated_conf.push_back(-s.score);
      for (int t = 0; t < kIouThresholdCount; ++t) {
        (s.tp[size_t(t)] ? tpc : fpc)[size_t(t)] += 1;
        recall[size_t(t)].push_back(tpc[size_t(t)] / (double(metrics.instances) + kEps));
        precision[size_t(t)].push_back(tpc[size_t(t)] / (tpc[size_t(t)] + fpc[size_t(t)]));
      }
    }
    if (!negated_conf.empty()) {
      for (size_t k = 0; k < px.size(); ++k) {
        r_row[k] = interp(-px[k], negated_conf, recall[0], 0.0);
        p_row[k] = interp(-px[k], negated_conf, precision[0], 1.0);
      }
      for (int t = 0; t < kIouThresholdCount; ++t)
        metrics.ap[size_t(t)] = average_precision(recall[size_t(t)], precision[size_t(t)]);
    }
    p_curve.push_back(std::move(p_row));
    r_curve.push_back(std::move(r_row));
  }
  if (classes.empty()) return result;

  std::vector<double> mean_f1(px.size(), 0.0);
  for (size_t c = 0; c < p_curve.size(); ++c)
    for (size_t k = 0; k < px.size(); ++k)
      mean_f1[k] +=
          2 * p_curve[c][k] * r_curve[c][k] / (p_curve[c][k] + r_curve[c][k] + kEps) / double(p_curve.size());
  const std::vector<double> smoothed = smooth(mean_f1);
  const size_t best = size_t(std::max_element(smoothed.begin(), smoothed.end()) - smoothed.begin());
  size_t c = 0;
  for (auto& [cls, metrics] : classes) {
    metrics.precision = p_curve[c][best];
    metrics.recall = r_curve[c][best];
    metrics.map50 = metrics.ap[0];
    metrics.map50_95 = std::accumulate(metrics.ap.begin(), metrics.ap.end(), 0.0) / kIouThresholdCount;
    result.precision += metrics.precision / double(classes.size());
    result.recall += metrics.recall / double(classes.size());
    result.map50 += metrics.map50 / double(classes.size());
    result.map50_95 += metrics.map50_95 / double(classes.size());
    result.classes.push_back(metrics);
    ++c;
  }
  return result;
}

}  // namespace lab::metrics
