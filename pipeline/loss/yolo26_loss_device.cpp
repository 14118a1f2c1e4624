// Yolo26Loss's device path: both heads through HeadLossOp with the head outputs and the gradients in device
// buffers, the two heads on two lanes; the ground truth is uploaded, the five sums of each head downloaded on
// a lane of their own, which the host waits for in finish_device().
// Data-parallel: the normalisers and the image count summed over the ranks between the assignment and the
// terms, the term sums after them.
#include <algorithm>
#include <functional>
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

// Reallocates a buffer of fewer than `count` floats.
void ensure_floats(Backend& backend, DeviceBuffer& buffer, size_t count) {
  if (buffer.bytes() < count * sizeof(float)) buffer = backend.alloc_array<float>(count);
}

// The term sums of both heads summed over every rank.
void sum_terms(const SumOverRanks& sum_over_ranks, HeadLossSums& one2many, HeadLossSums& one2one) {
  double terms[8] = {one2many.box, one2many.cls, one2many.l1, double(one2many.positives),
                     one2one.box,  one2one.cls,  one2one.l1,  double(one2one.positives)};
  sum_over_ranks(terms, 8);
  for (auto [head, k] : {std::pair{&one2many, 0}, std::pair{&one2one, 4}}) {
    head->box = terms[k], head->cls = terms[k + 1], head->l1 = terms[k + 2];
    head->positives = int(terms[k + 3]);
  }
}

}  // namespace

Yolo26Loss::DeviceWorkspace& Yolo26Loss::device_workspace(const DeviceLossBatch& batch, int max_gts) const {
  DeviceWorkspace* w = workspace_.get();
  if (w && w->height == batch.image_height && w->width == batch.image_width && w->batch == batch.batch &&
      w->max_gts >= max_gts)
    return *w;
  workspace_.reset();  // frees the old buffers before the new ones are allocated
  auto fresh = std::make_unique<DeviceWorkspace>();
  fresh->height = batch.image_height, fresh->width = batch.image_width;
  fresh->batch = batch.batch, fresh->max_gts = max_gts;
  fresh->anchors = upload_anchor_grid(backend_, make_anchor_grid(batch.image_height, batch.image_width));
  fresh->one2many = device_->allocate(batch.batch, max_gts, fresh->anchors.count);
  fresh->one2one = device_->allocate(batch.batch, max_gts, fresh->anchors.count);
  workspace_ = std::move(fresh);
  return *workspace_;
}

DeviceLossResult Yolo26Loss::compute_device(const DeviceLossBatch& batch) const {
  DeviceLossResult result;
  compute_device_into(batch, result);
  return result;
}

void Yolo26Loss::compute_device_into(const DeviceLossBatch& batch, DeviceLossResult& result,
                                     double gradient_scale) const {
  launch_device_into(batch, result, gradient_scale);
  finish_device(result);
}

void Yolo26Loss::launch_device_into(const DeviceLossBatch& batch, DeviceLossResult& result,
                                    double gradient_scale) const {
  if (!device_) throw UsageError("loss: compute_device needs a Yolo26Loss made for the device path");
  const size_t anchor_count = make_anchor_grid(batch.image_height, batch.image_width).size();
  validate_device_batch(batch, anchor_count);
  wait_for_sums();  // a launch never finished: its copies done before the buffers are reused
  DeviceWorkspace& ws = device_workspace(batch, max_ground_truth_rows(batch.ground_truth));
  DeviceGroundTruth& gts = ws.ground_truth;
  // Staged: the host goes on to the launches while the head outputs are still being computed. The last
  // finish_device() waited for the staging's previous copies (the sums' lane forks after them).
  upload_ground_truth_into(backend_, batch.ground_truth, ws.max_gts, gts, &ws.ground_truth_staging);
  const size_t box_count = size_t(batch.batch) * 4 * anchor_count;
  const size_t score_count = size_t(batch.batch) * batch.num_classes * anchor_count;

  result.weights = epoch_weights(config_.epoch, config_.epochs);
  ensure_floats(backend_, result.d_one2many_boxes, box_count);
  ensure_floats(backend_, result.d_one2many_scores, score_count);
  ensure_floats(backend_, result.d_one2one_boxes, box_count);
  ensure_floats(backend_, result.d_one2one_scores, score_count);
  const auto inputs = [&](const DeviceHeadOutputs& head) {
    return HeadLossInputs{*head.boxes, *head.scores, batch.num_classes, batch.image_height, batch.image_width,
                          ws.anchors,  gts};
  };
  const HeadLossInputs one2many = inputs(batch.one2many), one2one = inputs(batch.one2one);
  // The heads share only read-only inputs: the one-to-one head's launches on lane 1 beside the others.
  const auto both_heads = [this](const std::function<void()>& o2m, const std::function<void()>& o2o) {
    backend_.fork_lane(1);
    backend_.use_lane(1);
    o2o();
    backend_.use_lane(0);
    o2m();
    backend_.join_lane(1);
  };
  both_heads([&] { device_->assign(one2many, config_.one2many, ws.one2many); },
             [&] { device_->assign(one2one, config_.one2one, ws.one2one); });
  double images = batch.batch;
  if (batch.sum_over_ranks) images = share_normalisers(batch.sum_over_ranks, ws);
  const auto gains = [&](double weight) {
    return HeadLossGains{config_.box_gain, config_.cls_gain, config_.l1_gain,
                         images * weight * gradient_scale};
  };
  both_heads(
      [&] {
        device_->launch_terms(one2many, gains(result.weights.one2many), ws.one2many, result.d_one2many_boxes,
                              result.d_one2many_scores);
      },
      [&] {
        device_->launch_terms(one2one, gains(result.weights.one2one), ws.one2one, result.d_one2one_boxes,
                              result.d_one2one_scores);
      });
  // The sums' copy on a lane of its own: the host waits for it, not for the launches queued after it.
  constexpr size_t kSumBytes = 2 * HeadLossOp::kSumValues * sizeof(double);
  if (ws.sums.bytes() < kSumBytes) ws.sums = backend_.alloc_host(kSumBytes);
  backend_.fork_lane(kReadbackLane);
  backend_.use_lane(kReadbackLane);
  device_->download_sums_async(ws.one2many, ws.sums.as<double>());
  device_->download_sums_async(ws.one2one, ws.sums.as<double>() + HeadLossOp::kSumValues);
  backend_.use_lane(0);
  ws.images = images;
  ws.sum_over_ranks = batch.sum_over_ranks;
  ws.sums_pending = true;
}

Yolo26Loss::~Yolo26Loss() {
  try {
    wait_for_sums();
  } catch (...) {  // a device error: the backend reports it at its next call
  }
}

void Yolo26Loss::wait_for_sums() const {
  if (!workspace_ || !workspace_->sums_pending) return;
  backend_.wait_lane(kReadbackLane);
  backend_.join_lane(kReadbackLane);
  workspace_->sums_pending = false;
}

void Yolo26Loss::finish_device(DeviceLossResult& result) const {
  DeviceWorkspace* ws = workspace_.get();
  if (!ws || !ws->sums_pending)
    throw UsageError("loss: finish_device without a launch_device_into before it");
  wait_for_sums();
  HeadLossSums o2m = HeadLossOp::sums_from(ws->sums.as<const double>());
  HeadLossSums o2o = HeadLossOp::sums_from(ws->sums.as<const double>() + HeadLossOp::kSumValues);
  if (ws->sum_over_ranks) sum_terms(ws->sum_over_ranks, o2m, o2o);
  result.one2many = head_components(o2m, config_);
  result.one2one = head_components(o2o, config_);
  result.total = ws->images * (result.weights.one2many * result.one2many.sum() +
                               result.weights.one2one * result.one2one.sum());
}

double Yolo26Loss::share_normalisers(const SumOverRanks& sum_over_ranks, DeviceWorkspace& ws) const {
  HeadLossWorkspace* heads[2] = {&ws.one2many, &ws.one2one};
  double shared[3] = {0, 0, double(ws.batch)};  // each head's target-score sum, the images
  for (int h = 0; h < 2; ++h)
    backend_.download(&shared[h], heads[h]->assignment.target_score_sum.get(), sizeof(double));
  sum_over_ranks(shared, 3);
  for (int h = 0; h < 2; ++h)
    backend_.upload(heads[h]->assignment.target_score_sum.get(), &shared[h], sizeof(double));
  return shared[2];
}

}  // namespace lab::loss
