// Float64 reference of the YOLO26 loss: dense assigner, hand-derived CIoU gradient, BCE and L1 terms.
#include "pipeline/loss/loss_reference.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <numbers>

namespace lab::loss {
namespace {

using Xyxy = std::array<double, 4>;
using Matrix = std::vector<std::vector<double>>;  // [G][A]

constexpr double kEps = 1e-7;
constexpr double kV = 4 / (std::numbers::pi * std::numbers::pi);

double sigmoid(double x) {
  return 1 / (1 + std::exp(-x));
}

struct Ciou {
  double iou, v, alpha;
  double loss;                 // 1 - CIoU with the given alpha
  std::array<double, 4> grad;  // d loss / d box1 (x1, y1, x2, y2), alpha constant
};

// 1 - CIoU of box1 against box2 (spec/yolo26.md), alpha either computed (alpha < 0) or given.
Ciou ciou(const Xyxy& p, const Xyxy& t, double given_alpha = -1) {
  Ciou c;
  const double w1 = p[2] - p[0], h1 = p[3] - p[1] + kEps, w2 = t[2] - t[0], h2 = t[3] - t[1] + kEps;
  const double ix = std::min(p[2], t[2]) - std::max(p[0], t[0]);
  const double iy = std::min(p[3], t[3]) - std::max(p[1], t[1]);
  const double inter = std::max(ix, 0.0) * std::max(iy, 0.0);
  const double u = w1 * h1 + w2 * h2 - inter + kEps;
  c.iou = inter / u;
  const double cw = std::max(p[2], t[2]) - std::min(p[0], t[0]);
  const double ch = std::max(p[3], t[3]) - std::min(p[1], t[1]);
  const double c2 = cw * cw + ch * ch + kEps;
  const double sx = t[0] + t[2] - p[0] - p[2], sy = t[1] + t[3] - p[1] - p[3];
  const double rho2 = (sx * sx + sy * sy) / 4;
  const double dtheta = std::atan(w2 / h2) - std::atan(w1 / h1);
  c.v = kV * dtheta * dtheta;
  c.alpha = given_alpha >= 0 ? given_alpha : c.v / (c.v - c.iou + (1 + kEps));
  c.loss = 1 - (c.iou - (rho2 / c2 + c.v * c.alpha));

  // Derivatives of each intermediate with respect to (x1, y1, x2, y2) of box1; on a tie of a min/max the
  // target's coordinate is taken, so box1 gets no gradient through it.
  const double dw1[4] = {-1, 0, 1, 0}, dh1[4] = {0, -1, 0, 1};
  const double g_ix = ix > 0 ? std::max(iy, 0.0) : 0, g_iy = iy > 0 ? std::max(ix, 0.0) : 0;
  const double d_inter[4] = {g_ix * -(p[0] > t[0]), g_iy * -(p[1] > t[1]), g_ix * (p[2] < t[2]),
                             g_iy * (p[3] < t[3])};
  const double d_cw[4] = {-static_cast<double>(p[0] < t[0]), 0, static_cast<double>(p[2] > t[2]), 0};
  const double d_ch[4] = {0, -static_cast<double>(p[1] < t[1]), 0, static_cast<double>(p[3] > t[3])};
  const double d_rho2[4] = {-sx / 2, -sy / 2, -sx / 2, -sy / 2};
  const double atan_den = w1 * w1 + h1 * h1;
  for (int i = 0; i < 4; ++i) {
    const double d_u = h1 * dw1[i] + w1 * dh1[i] - d_inter[i];
    const double d_iou = (d_inter[i] * u - inter * d_u) / (u * u);
    const double d_c2 = 2 * cw * d_cw[i] + 2 * ch * d_ch[i];
    const double d_dist = d_rho2[i] / c2 - rho2 * d_c2 / (c2 * c2);
    const double d_theta1 = (h1 * dw1[i] - w1 * dh1[i]) / atan_den;
    const double d_v = 2 * kV * dtheta * -d_theta1;
    c.grad[i] = -d_iou + d_dist + c.alpha * d_v;
  }
  return c;
}

double bce_with_logits(double x, double t) {
  return std::max(x, 0.0) - x * t + std::log1p(std::exp(-std::abs(x)));
}

struct ImageView {
  const double* boxes;   // [4, A]
  const double* scores;  // [nc, A]
};

Xyxy pred_grid_xyxy(const AnchorGrid& anchors, const double* boxes, int a) {
  const size_t n = anchors.size();
  return {anchors.x[a] - boxes[a], anchors.y[a] - boxes[n + a], anchors.x[a] + boxes[2 * n + a],
          anchors.y[a] + boxes[3 * n + a]};
}

// Index of the k largest values of a row (ties: lower index first).
std::vector<int> topk_indices(const std::vector<double>& row, int k) {
  std::vector<int> order(row.size());
  for (size_t i = 0; i < row.size(); ++i) order[i] = static_cast<int>(i);
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return row[a] > row[b]; });
  order.resize(std::min(order.size(), static_cast<size_t>(k)));
  return order;
}

// The assigner for one image as dense [G, A] matrices, step by step as in Ultralytics' TaskAlignedAssigner.
void assign_dense(const LossBatch& batch, const ImageView& image, const std::vector<GtBox>& gts,
                  const AssignerSettings& s, std::vector<int>& gt_of_anchor, std::vector<double>& score) {
  const int A = static_cast<int>(batch.anchors.size()), G = static_cast<int>(gts.size());
  gt_of_anchor.assign(A, -1);
  score.assign(A, 0.0);
  if (G == 0) return;

  // select_candidates_in_gts (with the STAL widening) and mask_gt.
  Matrix in_gts(G, std::vector<double>(A, 0.0));
  std::vector<bool> mask_gt(G);
  for (int g = 0; g < G; ++g) {
    const GtBox& b = gts[g];
    mask_gt[g] = b.x1 + b.y1 + b.x2 + b.y2 > 0;
    double xywh[4] = {(b.x1 + b.x2) / 2, (b.y1 + b.y2) / 2, b.x2 - b.x1, b.y2 - b.y1};
    for (int k = 2; k < 4; ++k)
      if (xywh[k] < s.small_side && mask_gt[g]) xywh[k] = s.widened_side;
    const double lt[2] = {xywh[0] - xywh[2] / 2, xywh[1] - xywh[3] / 2};
    const double rb[2] = {xywh[0] + xywh[2] / 2, xywh[1] + xywh[3] / 2};
    for (int a = 0; a < A; ++a) {
      const double px = batch.anchors.x[a] * static_cast<double>(batch.anchors.stride[a]);
      const double py = batch.anchors.y[a] * static_cast<double>(batch.anchors.stride[a]);
      const double deltas[4] = {px - lt[0], py - lt[1], rb[0] - px, rb[1] - py};
      in_gts[g][a] = *std::min_element(deltas, deltas + 4) > s.eps ? 1 : 0;
    }
  }

  // get_box_metrics over mask = in_gts * mask_gt.
  Matrix overlaps(G, std::vector<double>(A, 0.0)), align(G, std::vector<double>(A, 0.0));
  for (int g = 0; g < G; ++g) {
    const Xyxy gt{gts[g].x1, gts[g].y1, gts[g].x2, gts[g].y2};
    for (int a = 0; a < A; ++a) {
      if (!(in_gts[g][a] > 0 && mask_gt[g])) continue;
      const double st = batch.anchors.stride[a];
      Xyxy pd = pred_grid_xyxy(batch.anchors, image.boxes, a);
      for (double& v : pd) v *= st;
      overlaps[g][a] = std::max(1 - ciou(gt, pd).loss, 0.0);  // CIoU(gt, pred) clamped at 0
      const double bbox_score = sigmoid(image.scores[static_cast<size_t>(gts[g].cls) * A + a]);
      align[g][a] = std::pow(bbox_score, s.alpha) * std::pow(overlaps[g][a], s.beta);
    }
  }

  // select_topk_candidates; an anchor with zero alignment is never selected (docs/loss.md).
  Matrix mask_pos(G, std::vector<double>(A, 0.0));
  for (int g = 0; g < G; ++g) {
    if (!mask_gt[g]) continue;
    for (int a : topk_indices(align[g], s.topk))
      if (align[g][a] > 0) mask_pos[g][a] = in_gts[g][a];
  }

  // select_highest_overlaps: anchors claimed more than once go to the gt of highest overlap (first on ties).
  for (int a = 0; a < A; ++a) {
    double claims = 0;
    for (int g = 0; g < G; ++g) claims += mask_pos[g][a];
    if (claims <= 1) continue;
    int best = 0;
    for (int g = 1; g < G; ++g)
      if (overlaps[g][a] > overlaps[best][a]) best = g;
    for (int g = 0; g < G; ++g) mask_pos[g][a] = g == best ? 1 : 0;
  }
  if (s.topk2 != s.topk) {
    for (int g = 0; g < G; ++g) {
      std::vector<double> masked(A), keep(A, 0.0);
      for (int a = 0; a < A; ++a) masked[a] = align[g][a] * mask_pos[g][a];
      for (int a : topk_indices(masked, s.topk2)) keep[a] = 1;
      for (int a = 0; a < A; ++a) mask_pos[g][a] *= keep[a];
    }
  }

  // Normalised target scores: align * max overlap of the gt / (max align of the gt + eps).
  std::vector<double> pos_align(G, 0.0), pos_overlap(G, 0.0);
  for (int g = 0; g < G; ++g)
    for (int a = 0; a < A; ++a) {
      pos_align[g] = std::max(pos_align[g], align[g][a] * mask_pos[g][a]);
      pos_overlap[g] = std::max(pos_overlap[g], overlaps[g][a] * mask_pos[g][a]);
    }
  for (int a = 0; a < A; ++a) {
    for (int g = 0; g < G; ++g) {
      if (mask_pos[g][a] == 0) continue;
      gt_of_anchor[a] = g;
      score[a] = align[g][a] * mask_pos[g][a] * pos_overlap[g] / (pos_align[g] + s.eps);
    }
  }
}

}  // namespace

ReferenceHead to_reference(const HeadOutputs& head) {
  return {std::vector<double>(head.boxes.begin(), head.boxes.end()),
          std::vector<double>(head.scores.begin(), head.scores.end())};
}

ReferenceDetached reference_detached(const LossBatch& batch, const ReferenceHead& head,
                                     const AssignerSettings& settings) {
  const size_t A = batch.anchors.size(), nc = static_cast<size_t>(batch.num_classes);
  ReferenceDetached d;
  d.gt_of_anchor.resize(batch.batch);
  d.target_score.resize(batch.batch);
  d.ciou_alpha.assign(batch.batch, std::vector<double>(A, 0.0));
  double sum = 0;
  for (int b = 0; b < batch.batch; ++b) {
    const ImageView image{head.boxes.data() + b * 4 * A, head.scores.data() + b * nc * A};
    assign_dense(batch, image, batch.ground_truth[b], settings, d.gt_of_anchor[b], d.target_score[b]);
    for (size_t a = 0; a < A; ++a) {
      const int g = d.gt_of_anchor[b][a];
      if (g < 0) continue;
      ++d.positives;
      sum += d.target_score[b][a];
      const GtBox& gt = batch.ground_truth[b][g];
      const double st = batch.anchors.stride[a];
      const Xyxy target{gt.x1 / st, gt.y1 / st, gt.x2 / st, gt.y2 / st};
      d.ciou_alpha[b][a] =
          ciou(pred_grid_xyxy(batch.anchors, image.boxes, static_cast<int>(a)), target).alpha;
    }
  }
  d.target_score_sum = std::max(sum, 1.0);
  return d;
}

ReferenceHeadResult reference_head_loss(const LossBatch& batch, const ReferenceHead& head,
                                        const ReferenceDetached& detached, const LossConfig& config,
                                        double grad_scale) {
  const size_t A = batch.anchors.size(), nc = static_cast<size_t>(batch.num_classes);
  const double tss = detached.target_score_sum;
  ReferenceHeadResult r;
  r.loss.positives = detached.positives;
  r.loss.target_score_sum = tss;
  r.gradient.boxes.assign(head.boxes.size(), 0.0);
  r.gradient.scores.assign(head.scores.size(), 0.0);
  double cls = 0, box = 0, l1 = 0;
  for (int b = 0; b < batch.batch; ++b) {
    for (size_t a = 0; a < A; ++a) {
      const int g = detached.gt_of_anchor[b][a];
      // Classification: every class of every anchor; the soft target only at the assigned class.
      for (size_t c = 0; c < nc; ++c) {
        const size_t i = (b * nc + c) * A + a;
        const double t = g >= 0 && static_cast<size_t>(batch.ground_truth[b][g].cls) == c
                             ? detached.target_score[b][a]
                             : 0.0;
        cls += bce_with_logits(head.scores[i], t);
        r.gradient.scores[i] = (sigmoid(head.scores[i]) - t) * config.cls_gain / tss * grad_scale;
      }
      if (g < 0) continue;
      // Box terms of a positive, weighted by its target score.
      const double weight = detached.target_score[b][a];
      const GtBox& gt = batch.ground_truth[b][g];
      const double st = batch.anchors.stride[a];
      const double* boxes = head.boxes.data() + b * 4 * A;
      const Xyxy target{gt.x1 / st, gt.y1 / st, gt.x2 / st, gt.y2 / st};
      const Ciou c =
          ciou(pred_grid_xyxy(batch.anchors, boxes, static_cast<int>(a)), target, detached.ciou_alpha[b][a]);
      box += c.loss * weight;
      const double box_scale = weight / tss * config.box_gain * grad_scale;
      // x1 = ax - l, y1 = ay - t, x2 = ax + r, y2 = ay + b.
      const double sign_of[4] = {-1, -1, 1, 1};
      const double anchor_xy[4] = {batch.anchors.x[a], batch.anchors.y[a], batch.anchors.x[a],
                                   batch.anchors.y[a]};
      const double size[4] = {static_cast<double>(batch.image_width), static_cast<double>(batch.image_height),
                              static_cast<double>(batch.image_width),
                              static_cast<double>(batch.image_height)};
      double l1_mean = 0;
      for (int k = 0; k < 4; ++k) {
        const size_t i = (b * 4 + k) * A + a;
        const double target_distance = sign_of[k] * (target[k] - anchor_xy[k]);
        const double diff = (head.boxes[i] - target_distance) * st / size[k];
        l1_mean += std::abs(diff) / 4;
        const double l1_grad = (diff > 0 ? 1.0 : diff < 0 ? -1.0 : 0.0) * st / size[k] / 4;
        r.gradient.boxes[i] +=
            sign_of[k] * c.grad[k] * box_scale + l1_grad * weight / tss * config.l1_gain * grad_scale;
      }
      l1 += l1_mean * weight;
    }
  }
  r.loss.cls = cls / tss * config.cls_gain;
  r.loss.box = box / tss * config.box_gain;
  r.loss.l1 = l1 / tss * config.l1_gain;
  return r;
}

LossResultT<double> reference_loss(const LossBatch& batch, const LossConfig& config) {
  validate_batch(batch);
  LossResultT<double> out;
  out.weights = epoch_weights(config.epoch, config.epochs);
  const ReferenceHead o2m = to_reference(batch.one2many), o2o = to_reference(batch.one2one);
  ReferenceHeadResult m = reference_head_loss(batch, o2m, reference_detached(batch, o2m, config.one2many),
                                              config, batch.batch * out.weights.one2many);
  ReferenceHeadResult o = reference_head_loss(batch, o2o, reference_detached(batch, o2o, config.one2one),
                                              config, batch.batch * out.weights.one2one);
  out.one2many = m.loss;
  out.one2one = o.loss;
  out.d_one2many = std::move(m.gradient);
  out.d_one2one = std::move(o.gradient);
  out.total =
      batch.batch * (out.weights.one2many * out.one2many.sum() + out.weights.one2one * out.one2one.sum());
  return out;
}

}  // namespace lab::loss
