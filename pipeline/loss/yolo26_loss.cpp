// Yolo26Loss's host path (assignment, L1 and the chain rule on the host; CIoU and BCE on the loss kernels)
// and the dispatch between the paths; the device path is yolo26_loss_device.cpp.
#include "pipeline/loss/yolo26_loss.hpp"

#include <algorithm>
#include <array>

#include "kernels/loss/host_assigner.hpp"

namespace lab::loss {
namespace {

double sign(double x) {
  return static_cast<double>((x > 0) - (x < 0));
}

// A positive anchor of the batch, with everything the box terms need.
struct BoxTerm {
  size_t box_offset;  // index of the anchor's l value in [B, 4, A]; t, r, b follow at +A, +2A, +3A
  double weight;      // target score of the assigned class (the sum over classes of the soft targets)
  std::array<double, 4> pred_xyxy, target_xyxy;  // grid units of the anchor's level
  double anchor_x, anchor_y, stride;
};

}  // namespace

const char* loss_path_name(LossPath path) {
  return path == LossPath::device ? "device" : "host";
}

Yolo26Loss::Yolo26Loss(Backend& backend, LossConfig config, LossPath path)
    : backend_(backend), config_(config), path_(path) {
  if (path == LossPath::host) {
    ciou_ = std::make_unique<CiouOp>(backend);
    bce_ = std::make_unique<ClsBceOp>(backend);
  } else {
    device_ = std::make_unique<HeadLossOp>(backend);
  }
}

LossResult Yolo26Loss::compute(const LossBatch& batch) const {
  validate_batch(batch);
  if (path_ == LossPath::host) return compute_host(batch);
  const DeviceBuffer o2m_boxes = backend_.upload_vector(batch.one2many.boxes);
  const DeviceBuffer o2m_scores = backend_.upload_vector(batch.one2many.scores);
  const DeviceBuffer o2o_boxes = backend_.upload_vector(batch.one2one.boxes);
  const DeviceBuffer o2o_scores = backend_.upload_vector(batch.one2one.scores);
  const DeviceLossResult device = compute_device({batch.batch,
                                                  batch.num_classes,
                                                  batch.image_height,
                                                  batch.image_width,
                                                  {&o2m_boxes, &o2m_scores},
                                                  {&o2o_boxes, &o2o_scores},
                                                  batch.ground_truth});
  LossResult result;
  result.one2many = device.one2many, result.one2one = device.one2one;
  result.weights = device.weights, result.total = device.total;
  const auto download = [&](const DeviceBuffer& from, const std::vector<float>& like) {
    return backend_.download_vector<float>(from, like.size());
  };
  result.d_one2many = {download(device.d_one2many_boxes, batch.one2many.boxes),
                       download(device.d_one2many_scores, batch.one2many.scores)};
  result.d_one2one = {download(device.d_one2one_boxes, batch.one2one.boxes),
                      download(device.d_one2one_scores, batch.one2one.scores)};
  return result;
}

LossResult Yolo26Loss::compute_host(const LossBatch& batch) const {
  LossResult result;
  result.weights = epoch_weights(config_.epoch, config_.epochs);
  result.one2many = host_head_loss(batch, batch.one2many, config_.one2many,
                                   batch.batch * result.weights.one2many, result.d_one2many);
  result.one2one = host_head_loss(batch, batch.one2one, config_.one2one, batch.batch * result.weights.one2one,
                                  result.d_one2one);
  result.total = batch.batch * (result.weights.one2many * result.one2many.sum() +
                                result.weights.one2one * result.one2one.sum());
  return result;
}

HeadLoss Yolo26Loss::host_head_loss(const LossBatch& batch, const HeadOutputs& head,
                                    const AssignerSettings& settings, double grad_scale,
                                    HeadGradients<float>& grads) const {
  const int images = batch.batch, nc = batch.num_classes;
  const int anchors = static_cast<int>(batch.anchors.size());
  const size_t box_plane = 4 * static_cast<size_t>(anchors), score_plane = static_cast<size_t>(nc) * anchors;
  grads.boxes.assign(images * box_plane, 0.0f);
  grads.scores.assign(images * score_plane, 0.0f);

  // Assignment (host) and the normaliser over the whole batch.
  std::vector<std::vector<Positive>> assigned(images);
  HeadLoss out;
  double score_sum = 0;
  for (int b = 0; b < images; ++b) {
    const ImageHead image{head.boxes.data() + b * box_plane, head.scores.data() + b * score_plane, nc};
    assigned[b] = assign_image(batch.anchors, image, batch.ground_truth[b], settings);
    for (const Positive& p : assigned[b]) score_sum += p.score;
    out.positives += static_cast<int>(assigned[b].size());
  }
  const double tss = std::max(score_sum, 1.0);
  out.target_score_sum = tss;

  // Classification BCE over every anchor and class, per image: logits [nc, A] are one image's slice.
  double cls_sum = 0;
  const std::vector<float> cls_dy(anchors, static_cast<float>(config_.cls_gain * grad_scale / tss));
  const DeviceBuffer cls_dy_device = backend_.upload_vector(cls_dy);
  for (int b = 0; b < images; ++b) {
    std::vector<float> logits(head.scores.begin() + b * score_plane,
                              head.scores.begin() + (b + 1) * score_plane);
    std::vector<float> targets(score_plane, 0.0f);
    for (const Positive& p : assigned[b])
      targets[batch.ground_truth[b][p.gt].cls * static_cast<size_t>(anchors) + p.anchor] =
          static_cast<float>(p.score);
    const DeviceBuffer logits_device = backend_.upload_vector(logits);
    const DeviceBuffer targets_device = backend_.upload_vector(targets);
    const DeviceBuffer loss = bce_->forward(logits_device, targets_device, nc, anchors);
    for (float value : backend_.download_vector<float>(loss, anchors)) cls_sum += value;
    const DeviceBuffer d_logits = bce_->backward(logits_device, targets_device, cls_dy_device, nc, anchors);
    backend_.download(grads.scores.data() + b * score_plane, d_logits.get(), score_plane * sizeof(float));
  }
  out.cls = cls_sum / tss * config_.cls_gain;

  // Box terms over the positives of the whole batch.
  std::vector<BoxTerm> terms;
  for (int b = 0; b < images; ++b) {
    for (const Positive& p : assigned[b]) {
      BoxTerm t;
      t.box_offset = b * box_plane + p.anchor;
      t.weight = p.score;
      t.anchor_x = batch.anchors.x[p.anchor];
      t.anchor_y = batch.anchors.y[p.anchor];
      t.stride = batch.anchors.stride[p.anchor];
      const float* ltrb = head.boxes.data() + t.box_offset;
      t.pred_xyxy = {t.anchor_x - ltrb[0], t.anchor_y - ltrb[anchors], t.anchor_x + ltrb[2 * anchors],
                     t.anchor_y + ltrb[3 * anchors]};
      const GtBox& g = batch.ground_truth[b][p.gt];
      t.target_xyxy = {g.x1 / t.stride, g.y1 / t.stride, g.x2 / t.stride, g.y2 / t.stride};
      terms.push_back(t);
    }
  }
  const int n = static_cast<int>(terms.size());
  if (n == 0) return out;

  // L1 on the distances, in units of the image size (host: 4 values per positive).
  double l1_sum = 0;
  std::vector<double> box_grad(4 * static_cast<size_t>(n), 0.0);  // d total / d (l, t, r, b), [4, N]
  for (int i = 0; i < n; ++i) {
    const BoxTerm& t = terms[i];
    const double scale[4] = {t.stride / batch.image_width, t.stride / batch.image_height,
                             t.stride / batch.image_width, t.stride / batch.image_height};
    const double pred[4] = {t.anchor_x - t.pred_xyxy[0], t.anchor_y - t.pred_xyxy[1],
                            t.pred_xyxy[2] - t.anchor_x, t.pred_xyxy[3] - t.anchor_y};
    const double target[4] = {t.anchor_x - t.target_xyxy[0], t.anchor_y - t.target_xyxy[1],
                              t.target_xyxy[2] - t.anchor_x, t.target_xyxy[3] - t.anchor_y};
    double mean_abs = 0;
    for (int k = 0; k < 4; ++k) {
      const double diff = (pred[k] - target[k]) * scale[k];
      mean_abs += std::abs(diff) / 4;
      box_grad[k * n + i] += sign(diff) * scale[k] / 4 * t.weight / tss * config_.l1_gain * grad_scale;
    }
    l1_sum += mean_abs * t.weight;
  }
  out.l1 = l1_sum / tss * config_.l1_gain;

  // CIoU on the kernels: boxes as XYWH [4, N] in grid units.
  std::vector<float> pred(4 * static_cast<size_t>(n)), target(4 * static_cast<size_t>(n)), dy(n);
  for (int i = 0; i < n; ++i) {
    const auto& p = terms[i].pred_xyxy;
    const auto& g = terms[i].target_xyxy;
    const double pred_xywh[4] = {(p[0] + p[2]) / 2, (p[1] + p[3]) / 2, p[2] - p[0], p[3] - p[1]};
    const double target_xywh[4] = {(g[0] + g[2]) / 2, (g[1] + g[3]) / 2, g[2] - g[0], g[3] - g[1]};
    for (int k = 0; k < 4; ++k) {
      pred[k * n + i] = static_cast<float>(pred_xywh[k]);
      target[k * n + i] = static_cast<float>(target_xywh[k]);
    }
    dy[i] = static_cast<float>(terms[i].weight / tss * config_.box_gain * grad_scale);
  }
  const DeviceBuffer pred_device = backend_.upload_vector(pred);
  const DeviceBuffer target_device = backend_.upload_vector(target);
  const CiouSaved saved = ciou_->forward(pred_device, target_device, n);
  const std::vector<float> ciou_loss = backend_.download_vector<float>(saved.loss, n);
  double box_sum = 0;
  for (int i = 0; i < n; ++i) box_sum += static_cast<double>(ciou_loss[i]) * terms[i].weight;
  out.box = box_sum / tss * config_.box_gain;

  const DeviceBuffer dy_device = backend_.upload_vector(dy);
  const DeviceBuffer d_pred_device = ciou_->backward(pred_device, target_device, saved, dy_device, n);
  const std::vector<float> d_xywh =
      backend_.download_vector<float>(d_pred_device, 4 * static_cast<size_t>(n));

  // Chain rule XYWH -> xyxy -> ltrb: x1 = ax - l, x2 = ax + r, cx = (x1 + x2) / 2, w = x2 - x1.
  for (int i = 0; i < n; ++i) {
    const double dcx = d_xywh[0 * n + i], dcy = d_xywh[1 * n + i], dw = d_xywh[2 * n + i],
                 dh = d_xywh[3 * n + i];
    box_grad[0 * n + i] -= dcx / 2 - dw;  // d/dl = -d/dx1
    box_grad[1 * n + i] -= dcy / 2 - dh;  // d/dt = -d/dy1
    box_grad[2 * n + i] += dcx / 2 + dw;  // d/dr = d/dx2
    box_grad[3 * n + i] += dcy / 2 + dh;  // d/db = d/dy2
    for (int k = 0; k < 4; ++k)
      grads.boxes[terms[i].box_offset + k * static_cast<size_t>(anchors)] =
          static_cast<float>(box_grad[k * n + i]);
  }
  return out;
}

}  // namespace lab::loss
