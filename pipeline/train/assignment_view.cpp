// assignment_view: the reference forward of both heads, the device assignment of each (TalAssignOp), and its
// per-anchor outputs (gt_of_anchor, target_score) with the per-(gt, anchor) metrics (align, overlap) read
// back and regrouped per ground-truth box.
#include "pipeline/train/assignment_view.hpp"

#include <string>

#include "kernels/loss/tal_assign_op.hpp"
#include "nvrtc_runtime/errors.hpp"
#include "pipeline/network.hpp"

namespace lab::train {
namespace {

// The level of each anchor: the index of its stride among the grid's strides in order (P3, P4, P5).
std::vector<int> anchor_levels(const AnchorGrid& grid) {
  std::vector<int> levels(grid.size());
  int level = 0;
  for (size_t a = 0; a < grid.size(); ++a) {
    if (a > 0 && grid.stride[a] != grid.stride[a - 1]) ++level;
    levels[a] = level;
  }
  return levels;
}

// One head's positives, appended per gt into `per_box` through `member` (one2many or one2one).
int assign_head(Backend& backend, const TalAssignOp& op, const loss::HeadOutputs& head, int num_classes,
                const AnchorGrid& grid, const DeviceAnchorGrid& device_grid, const DeviceGroundTruth& gts,
                const loss::AssignerSettings& settings, std::vector<BoxAssignment>& per_box,
                std::vector<PositiveAnchor> BoxAssignment::*member) {
  const int anchors = static_cast<int>(grid.size());
  const DeviceBuffer boxes = backend.upload_vector(head.boxes);
  const DeviceBuffer logits = backend.upload_vector(head.scores);
  TalAssignment out = op.allocate(1, gts.max_gts, anchors);
  op.assign_into(boxes, logits, num_classes, device_grid, gts, settings, out);
  backend.synchronize();
  const std::vector<int> gt_of_anchor = backend.download_vector<int>(out.gt_of_anchor, anchors);
  const std::vector<double> score = backend.download_vector<double>(out.target_score, anchors);
  const size_t metrics = size_t(gts.max_gts) * anchors;  // [G, A] of the one image
  const std::vector<double> align = backend.download_vector<double>(out.align, metrics);
  const std::vector<double> overlap = backend.download_vector<double>(out.overlap, metrics);

  const std::vector<int> levels = anchor_levels(grid);
  int positives = 0;
  for (int a = 0; a < anchors; ++a) {
    const int g = gt_of_anchor[size_t(a)];
    if (g < 0) continue;
    if (size_t(g) >= per_box.size())
      throw RuntimeError("assignment view: anchor " + std::to_string(a) + " assigned to gt " +
                         std::to_string(g) + " of " + std::to_string(per_box.size()));
    const size_t at = size_t(g) * anchors + size_t(a);
    PositiveAnchor p;
    p.anchor = a;
    p.level = levels[size_t(a)];
    p.stride = static_cast<int>(grid.stride[size_t(a)]);
    p.x = double(grid.x[size_t(a)]) * p.stride;
    p.y = double(grid.y[size_t(a)]) * p.stride;
    p.align = align[at];
    p.overlap = overlap[at];
    p.score = score[size_t(a)];
    (per_box[size_t(g)].*member).push_back(p);
    ++positives;
  }
  return positives;
}

}  // namespace

ImageHeads forward_heads(const Yolo26Model& model, const std::vector<float>& input, int height, int width) {
  const LayerSpec& detect_layer = model.layers.back();
  if (detect_layer.kind != LayerSpec::Kind::Detect || detect_layer.detect.one2many.empty())
    throw UsageError(model.source + ": the checkpoint has no one-to-many head (model.23.cv2/cv3)");
  if (input.size() != size_t(3) * height * width)
    throw UsageError("assignment view: the input has " + std::to_string(input.size()) + " values, not 3 x " +
                     std::to_string(height) + " x " + std::to_string(width));
  const std::unique_ptr<Network> network = make_reference_network(model);
  network->forward(input.data(), 1, height, width);
  ImageHeads heads;
  heads.num_classes = detect_layer.detect.nc;
  heads.one2many = {network->tensor("head.one2many.boxes").values,
                    network->tensor("head.one2many.scores").values};
  heads.one2one = {network->tensor("head.boxes").values, network->tensor("head.scores").values};
  return heads;
}

AssignmentView assign_heads(Backend& backend, const ImageHeads& heads, int height, int width,
                            const std::vector<loss::GtBox>& ground_truth, const loss::LossConfig& config) {
  const AnchorGrid grid = make_anchor_grid(height, width);
  const size_t anchors = grid.size();
  for (const loss::HeadOutputs* head : {&heads.one2many, &heads.one2one})
    if (head->boxes.size() != 4 * anchors || head->scores.size() != size_t(heads.num_classes) * anchors)
      throw UsageError("assignment view: head outputs of " + std::to_string(head->boxes.size()) + " and " +
                       std::to_string(head->scores.size()) + " values do not match " +
                       std::to_string(anchors) + " anchors of a " + std::to_string(width) + "x" +
                       std::to_string(height) + " input");
  loss::validate_ground_truth({ground_truth}, 1, heads.num_classes);

  AssignmentView view;
  view.height = height, view.width = width;
  for (const loss::GtBox& box : ground_truth) view.boxes.push_back({box, {}, {}});
  if (ground_truth.empty()) return view;

  const TalAssignOp op(backend);
  const DeviceAnchorGrid device_grid = upload_anchor_grid(backend, grid);
  const DeviceGroundTruth gts = upload_ground_truth(backend, {ground_truth});
  view.one2many_positives = assign_head(backend, op, heads.one2many, heads.num_classes, grid, device_grid,
                                        gts, config.one2many, view.boxes, &BoxAssignment::one2many);
  view.one2one_positives = assign_head(backend, op, heads.one2one, heads.num_classes, grid, device_grid, gts,
                                       config.one2one, view.boxes, &BoxAssignment::one2one);
  return view;
}

AssignmentView assignment_view(Backend& backend, const Yolo26Model& model, const std::vector<float>& input,
                               int height, int width, const std::vector<loss::GtBox>& ground_truth,
                               const loss::LossConfig& config) {
  return assign_heads(backend, forward_heads(model, input, height, width), height, width, ground_truth,
                      config);
}

}  // namespace lab::train
