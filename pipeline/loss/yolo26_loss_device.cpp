// Yolo26Loss's device path: both heads through HeadLossOp with the head outputs and the gradients in device
// buffers; the ground truth is uploaded, the five sums of each head downloaded.
#include <algorithm>
#include <string>

#include "nvrtc_runtime/errors.hpp"
#include "pipeline/loss/yolo26_loss.hpp"

namespace lab::loss {
namespace {

// UsageError unless the batch's sizes, buffers and ground truth agree (validate_batch's rules, on buffers).
void validate_device_batch(const DeviceLossBatch& batch, size_t anchors) {
  const size_t b = static_cast<size_t>(batch.batch), nc = static_cast<size_t>(batch.num_classes);
  if (batch.batch < 1 || batch.num_classes < 1) throw UsageError("loss: batch and classes must be positive");
  for (auto [head, name] : {std::pair{&batch.one2many, "one2many"}, std::pair{&batch.one2one, "one2one"}})
    if (!head->boxes || !head->scores || head->boxes->bytes() < b * 4 * anchors * sizeof(float) ||
        head->scores->bytes() < b * nc * anchors * sizeof(float))
      throw UsageError(std::string("loss: ") + name + " device outputs are smaller than [" +
                       std::to_string(b) + ", 4, " + std::to_string(anchors) + "] and [" + std::to_string(b) +
                       ", " + std::to_string(nc) + ", " + std::to_string(anchors) + "]");
  validate_ground_truth(batch.ground_truth, batch.batch, batch.num_classes);
}

// Components after the gains and the normaliser, per image (Ultralytics' loss_items).
HeadLoss head_components(const HeadLossSums& s, const LossConfig& config) {
  HeadLoss h;
  h.positives = s.positives;
  h.target_score_sum = std::max(s.target_score_sum, 1.0);
  h.box = s.box / h.target_score_sum * config.box_gain;
  h.cls = s.cls / h.target_score_sum * config.cls_gain;
  h.l1 = s.l1 / h.target_score_sum * config.l1_gain;
  return h;
}

}  // namespace

DeviceLossResult Yolo26Loss::compute_device(const DeviceLossBatch& batch) const {
  if (!device_) throw UsageError("loss: compute_device needs a Yolo26Loss made for the device path");
  const AnchorGrid grid = make_anchor_grid(batch.image_height, batch.image_width);
  validate_device_batch(batch, grid.size());
  const DeviceAnchorGrid anchors = upload_anchor_grid(backend_, grid);
  const DeviceGroundTruth gts = upload_ground_truth(backend_, batch.ground_truth);
  const size_t box_count = size_t(batch.batch) * 4 * grid.size();
  const size_t score_count = size_t(batch.batch) * batch.num_classes * grid.size();

  DeviceLossResult result;
  result.weights = epoch_weights(config_.epoch, config_.epochs);
  result.d_one2many_boxes = backend_.alloc_array<float>(box_count);
  result.d_one2many_scores = backend_.alloc_array<float>(score_count);
  result.d_one2one_boxes = backend_.alloc_array<float>(box_count);
  result.d_one2one_scores = backend_.alloc_array<float>(score_count);
  HeadLossWorkspace o2m_ws = device_->allocate(batch.batch, gts.max_gts, anchors.count);
  HeadLossWorkspace o2o_ws = device_->allocate(batch.batch, gts.max_gts, anchors.count);
  const auto gains = [&](double weight) {
    return HeadLossGains{config_.box_gain, config_.cls_gain, config_.l1_gain, batch.batch * weight};
  };
  device_->launch({*batch.one2many.boxes, *batch.one2many.scores, batch.num_classes, batch.image_height,
                   batch.image_width, anchors, gts},
                  config_.one2many, gains(result.weights.one2many), o2m_ws, result.d_one2many_boxes,
                  result.d_one2many_scores);
  device_->launch({*batch.one2one.boxes, *batch.one2one.scores, batch.num_classes, batch.image_height,
                   batch.image_width, anchors, gts},
                  config_.one2one, gains(result.weights.one2one), o2o_ws, result.d_one2one_boxes,
                  result.d_one2one_scores);
  result.one2many = head_components(device_->sums(o2m_ws), config_);
  result.one2one = head_components(device_->sums(o2o_ws), config_);
  result.total = batch.batch * (result.weights.one2many * result.one2many.sum() +
                                result.weights.one2one * result.one2one.sum());
  return result;
}

}  // namespace lab::loss
