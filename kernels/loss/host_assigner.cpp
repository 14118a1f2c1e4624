// Host task-aligned assigner: candidates per gt, top-k by alignment, conflict resolution by IoU, top-k2,
// soft target scores.
#include "kernels/loss/host_assigner.hpp"

#include <algorithm>
#include <cmath>
#include <numbers>

namespace lab::loss {
namespace {

struct Box {
  double x1, y1, x2, y2;
};

// CIoU of two xyxy boxes exactly as spec/yolo26.md writes it (eps = 1e-7).
double ciou(const Box& a, const Box& b) {
  constexpr double eps = 1e-7;
  const double w1 = a.x2 - a.x1, h1 = a.y2 - a.y1 + eps;
  const double w2 = b.x2 - b.x1, h2 = b.y2 - b.y1 + eps;
  const double inter = std::max(std::min(a.x2, b.x2) - std::max(a.x1, b.x1), 0.0) *
                       std::max(std::min(a.y2, b.y2) - std::max(a.y1, b.y1), 0.0);
  const double iou = inter / (w1 * h1 + w2 * h2 - inter + eps);
  const double cw = std::max(a.x2, b.x2) - std::min(a.x1, b.x1);
  const double ch = std::max(a.y2, b.y2) - std::min(a.y1, b.y1);
  const double c2 = cw * cw + ch * ch + eps;
  const double dx = b.x1 + b.x2 - a.x1 - a.x2, dy = b.y1 + b.y2 - a.y1 - a.y2;
  const double rho2 = (dx * dx + dy * dy) / 4;
  const double dtheta = std::atan(w2 / h2) - std::atan(w1 / h1);
  const double v = 4 / (std::numbers::pi * std::numbers::pi) * dtheta * dtheta;
  const double alpha = v / (v - iou + (1 + eps));
  return iou - (rho2 / c2 + v * alpha);
}

struct Candidate {
  int anchor;
  double overlap, align;
};

// Per gt: its candidates (anchor centre inside the widened box), sorted by anchor.
struct GtCandidates {
  std::vector<Candidate> candidates;
  const Candidate* find(int anchor) const {
    auto it = std::lower_bound(candidates.begin(), candidates.end(), anchor,
                               [](const Candidate& c, int a) { return c.anchor < a; });
    return it != candidates.end() && it->anchor == anchor ? &*it : nullptr;
  }
};

// Better in the top-k order: higher alignment, then lower anchor index.
bool ranks_before(const Candidate& a, const Candidate& b) {
  return a.align != b.align ? a.align > b.align : a.anchor < b.anchor;
}

std::vector<Candidate> best(std::vector<Candidate> from, int k) {
  const size_t keep = std::min<size_t>(from.size(), static_cast<size_t>(k));
  std::partial_sort(from.begin(), from.begin() + static_cast<ptrdiff_t>(keep), from.end(), ranks_before);
  from.resize(keep);
  return from;
}

GtCandidates gather_candidates(const AnchorGrid& anchors, const ImageHead& head, const GtBox& gt,
                               const AssignerSettings& s) {
  GtCandidates out;
  if (gt.x1 + gt.y1 + gt.x2 + gt.y2 <= 0) return out;  // Ultralytics treats such rows as padding
  // STAL: a side shorter than the smallest stride is widened around the centre, for this test only.
  const double cx = (gt.x1 + gt.x2) / 2, cy = (gt.y1 + gt.y2) / 2;
  const double w = gt.x2 - gt.x1 < s.small_side ? s.widened_side : gt.x2 - gt.x1;
  const double h = gt.y2 - gt.y1 < s.small_side ? s.widened_side : gt.y2 - gt.y1;
  const Box test{cx - w / 2, cy - h / 2, cx + w / 2, cy + h / 2};
  const Box gt_box{gt.x1, gt.y1, gt.x2, gt.y2};
  const int count = static_cast<int>(anchors.size());
  for (int a = 0; a < count; ++a) {
    const double ax = anchors.x[a], ay = anchors.y[a], st = anchors.stride[a];
    const double px = ax * st, py = ay * st;
    const double inside =
        std::min(std::min(px - test.x1, py - test.y1), std::min(test.x2 - px, test.y2 - py));
    if (!(inside > s.eps)) continue;
    const Box pred{(ax - head.boxes[0 * count + a]) * st, (ay - head.boxes[1 * count + a]) * st,
                   (ax + head.boxes[2 * count + a]) * st, (ay + head.boxes[3 * count + a]) * st};
    const double overlap = std::max(ciou(gt_box, pred), 0.0);
    const double score = 1 / (1 + std::exp(-static_cast<double>(head.logits[gt.cls * count + a])));
    out.candidates.push_back({a, overlap, std::pow(score, s.alpha) * std::pow(overlap, s.beta)});
  }
  return out;
}

}  // namespace

std::vector<Positive> assign_image(const AnchorGrid& anchors, const ImageHead& head,
                                   const std::vector<GtBox>& gts, const AssignerSettings& settings) {
  const int num_gts = static_cast<int>(gts.size());
  std::vector<GtCandidates> per_gt;
  for (const GtBox& gt : gts) per_gt.push_back(gather_candidates(anchors, head, gt, settings));

  // Top-k candidates of each gt by alignment; every anchor remembers the gts that claimed it.
  std::vector<std::vector<int>> claims(static_cast<size_t>(anchors.size()));
  for (int g = 0; g < num_gts; ++g) {
    std::vector<Candidate> aligned;
    for (const Candidate& c : per_gt[g].candidates)
      if (c.align > 0) aligned.push_back(c);
    for (const Candidate& c : best(std::move(aligned), settings.topk)) claims[c.anchor].push_back(g);
  }

  // Conflict resolution: an anchor claimed by several gts goes to the gt of highest IoU among all gts (the
  // first on ties), which need not be one of the claimants.
  std::vector<std::vector<Candidate>> positives(static_cast<size_t>(num_gts));
  for (int a = 0; a < static_cast<int>(anchors.size()); ++a) {
    if (claims[a].empty()) continue;
    int owner = claims[a][0];
    if (claims[a].size() > 1) {
      double best_overlap = -1;
      for (int g = 0; g < num_gts; ++g) {
        const Candidate* c = per_gt[g].find(a);
        const double overlap = c ? c->overlap : 0.0;
        if (overlap > best_overlap) best_overlap = overlap, owner = g;
      }
    }
    positives[owner].push_back(*per_gt[owner].find(a));
  }

  std::vector<Positive> out;
  for (int g = 0; g < num_gts; ++g) {
    if (settings.topk2 != settings.topk) positives[g] = best(std::move(positives[g]), settings.topk2);
    double max_align = 0, max_overlap = 0;
    for (const Candidate& c : positives[g]) {
      max_align = std::max(max_align, c.align);
      max_overlap = std::max(max_overlap, c.overlap);
    }
    for (const Candidate& c : positives[g])
      out.push_back({c.anchor, g, c.align * max_overlap / (max_align + settings.eps)});
  }
  std::sort(out.begin(), out.end(), [](const Positive& a, const Positive& b) { return a.anchor < b.anchor; });
  return out;
}

}  // namespace lab::loss
