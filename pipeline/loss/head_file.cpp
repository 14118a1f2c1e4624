// Reading raw head outputs from safetensors, comparing and writing gradients.
#include "pipeline/loss/head_file.hpp"

#include <cmath>

#include "nvrtc_runtime/errors.hpp"

namespace lab::loss {
namespace {

double rel_l2(const std::vector<float>& out, const std::vector<float>& ref) {
  double diff = 0, norm = 0;
  for (size_t i = 0; i < out.size(); ++i) {
    const double d = static_cast<double>(out[i]) - ref[i];
    diff += d * d;
    norm += static_cast<double>(ref[i]) * ref[i];
  }
  return std::sqrt(diff / std::max(norm, 1e-300));
}

}  // namespace

LossBatch load_head_outputs(const SafetensorsFile& file, int image_height, int image_width) {
  const std::string at = file.path().string() + ": ";
  const SafetensorsTensorInfo& boxes = file.info("one2many.boxes");
  const SafetensorsTensorInfo& scores = file.info("one2many.scores");
  if (boxes.shape.size() != 3 || boxes.shape[1] != 4 || scores.shape.size() != 3 ||
      scores.shape[0] != boxes.shape[0] || scores.shape[2] != boxes.shape[2] || boxes.shape[0] < 1 ||
      scores.shape[1] < 1)
    throw UsageError(at + "one2many.boxes " + shape_text(boxes.shape) + " and one2many.scores " +
                     shape_text(scores.shape) + " must be [B, 4, A] and [B, nc, A]");
  LossBatch batch;
  batch.batch = static_cast<int>(boxes.shape[0]);
  batch.num_classes = static_cast<int>(scores.shape[1]);
  batch.image_height = image_height;
  batch.image_width = image_width;
  batch.anchors = make_anchor_grid(image_height, image_width);
  if (static_cast<int64_t>(batch.anchors.size()) != boxes.shape[2])
    throw UsageError(at + std::to_string(boxes.shape[2]) + " anchors, but a " + std::to_string(image_height) +
                     "x" + std::to_string(image_width) + " (h x w) input has " +
                     std::to_string(batch.anchors.size()) + " (check --imgsz and the letterbox)");
  batch.one2many = {file.floats("one2many.boxes"), file.floats("one2many.scores")};
  batch.one2one = {file.floats("one2one.boxes", boxes.shape), file.floats("one2one.scores", scores.shape)};
  batch.ground_truth.resize(batch.batch);
  return batch;
}

std::map<std::string, double> compare_stored_gradients(const SafetensorsFile& file,
                                                       const LossResult& result) {
  const std::pair<std::string, const std::vector<float>*> grads[] = {
      {"one2many.boxes", &result.d_one2many.boxes},
      {"one2many.scores", &result.d_one2many.scores},
      {"one2one.boxes", &result.d_one2one.boxes},
      {"one2one.scores", &result.d_one2one.scores}};
  std::map<std::string, double> out;
  for (const auto& [key, grad] : grads) {
    const std::string stored = key + ".grad";
    if (!file.contains(stored)) continue;
    if (file.info(stored).element_count() != grad->size())
      throw UsageError(file.path().string() + ": " + stored + " has " +
                       std::to_string(file.info(stored).element_count()) + " values, the head has " +
                       std::to_string(grad->size()));
    out[key] = rel_l2(*grad, file.floats(stored));
  }
  return out;
}

void write_gradients(const std::filesystem::path& path, const LossBatch& batch, const LossResult& result) {
  const int64_t b = batch.batch, nc = batch.num_classes, a = static_cast<int64_t>(batch.anchors.size());
  write_safetensors(path,
                    {f32_tensor("one2many.boxes.grad", {b, 4, a}, result.d_one2many.boxes),
                     f32_tensor("one2many.scores.grad", {b, nc, a}, result.d_one2many.scores),
                     f32_tensor("one2one.boxes.grad", {b, 4, a}, result.d_one2one.boxes),
                     f32_tensor("one2one.scores.grad", {b, nc, a}, result.d_one2one.scores)},
                    {{"producer", "lab loss"}, {"total", std::to_string(result.total)}});
}

}  // namespace lab::loss
