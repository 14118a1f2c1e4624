// PlanRecorder: lanes and the detect tail (decode, top-k) shared by the plan builders of both layouts.
#include "pipeline/executor/plan_walk.hpp"

#include "nvrtc_runtime/errors.hpp"

namespace lab {

PsaDims psa_dims(const AttentionSpec& a, int batch, int tokens) {
  PsaDims dims;
  dims.batch = batch, dims.num_heads = a.num_heads, dims.key_dim = a.key_dim;
  dims.n = tokens, dims.scale = a.scale;
  return dims;
}

void check_input_shape(int batch, int height, int width) {
  if (batch < 1 || height <= 0 || width <= 0 || height % 32 || width % 32)
    throw UsageError("input shape " + std::to_string(batch) + "x3x" + std::to_string(height) + "x" +
                     std::to_string(width) + " is invalid: batch >= 1, height and width multiples of 32");
}

std::string layer_name(int index) {
  return std::string("layer") + (index < 10 ? "0" : "") + std::to_string(index);
}

void PlanRecorder::fork_lanes(int count) {
  if (measuring_) return;
  Backend& backend = backend_;
  record([&backend, count] { backend.fork_lanes(count); });
}

void PlanRecorder::use_lane(int lane) {
  lane_ = lane;
  if (measuring_) return;
  Backend& backend = backend_;
  record([&backend, lane] { backend.use_lane(lane); });
}

void PlanRecorder::join_lanes() {
  lane_ = 0;
  if (measuring_) return;
  Backend& backend = backend_;
  record([&backend] { backend.join_lanes(); });
}

std::pair<Activation, Activation> PlanRecorder::head_outputs(int anchors, int nc) {
  Activation boxes = plan_.arena.take_activation(plan_.batch, 4, 1, anchors);
  Activation scores = plan_.arena.take_activation(plan_.batch, nc, 1, anchors);
  plan_.tensors["head.boxes"] = boxes;
  plan_.tensors["head.scores"] = scores;
  return {boxes, scores};
}

void PlanRecorder::detect_tail(const DetectSpec& d, const std::function<const DetectDecodeOp&()>& decode_op,
                               const Activation& boxes, const Activation& scores) {
  const int batch = plan_.batch, anchors = boxes.width;
  Activation decoded = plan_.arena.take_activation(batch, 4, 1, anchors);
  plan_.max_det = std::min(d.max_det, anchors);
  plan_.detections = plan_.arena.take(size_t(batch) * plan_.max_det * 6);
  if (measuring_) return;
  layer_ = "decode";
  const DetectDecodeOp* dec = &decode_op();
  const float* raw = boxes.data;
  float* out = decoded.data;
  record([dec, raw, batch, out] { dec->decode(raw, batch, out); });
  layer_ = "topk";
  plan_.topk = std::make_unique<TopkPostprocessOp>(backend_, anchors, d.nc, d.max_det, batch);
  TopkPostprocessOp* topk = plan_.topk.get();
  const float *dec_boxes = decoded.data, *logits = scores.data;
  float* dets = plan_.detections;
  record([topk, batch, dec_boxes, logits, dets] { topk->run(batch, dec_boxes, logits, dets); });
}

}  // namespace lab
