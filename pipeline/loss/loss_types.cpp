// Epoch schedule of the head weights and validation of a loss batch.
#include "pipeline/loss/loss_types.hpp"

#include <algorithm>
#include <string>

#include "nvrtc_runtime/errors.hpp"

namespace lab::loss {

HeadWeights epoch_weights(int epoch, int epochs) {
  if (epochs < 1 || epoch < 0)
    throw UsageError("loss: epoch " + std::to_string(epoch) + " of " + std::to_string(epochs) +
                     " (need epoch >= 0 and epochs >= 1)");
  constexpr double start = 0.8, end = 0.1;
  const double progress = std::max(1.0 - static_cast<double>(epoch) / std::max(epochs - 1, 1), 0.0);
  HeadWeights w;
  w.one2many = progress * (start - end) + end;
  w.one2one = std::max(1.0 - w.one2many, 0.0);
  return w;
}

void validate_batch(const LossBatch& batch) {
  const size_t b = static_cast<size_t>(batch.batch), a = static_cast<size_t>(batch.anchors.size());
  const size_t nc = static_cast<size_t>(batch.num_classes);
  if (batch.batch < 1 || batch.num_classes < 1 || a == 0)
    throw UsageError("loss: batch, classes and anchors must be positive");
  if (make_anchor_grid(batch.image_height, batch.image_width).size() != a)
    throw UsageError("loss: " + std::to_string(a) + " anchors do not match a " +
                     std::to_string(batch.image_height) + "x" + std::to_string(batch.image_width) + " (h x w) input");
  auto check_head = [&](const HeadOutputs& head, const char* name) {
    if (head.boxes.size() != b * 4 * a || head.scores.size() != b * nc * a)
      throw UsageError(std::string("loss: ") + name + " outputs have " + std::to_string(head.boxes.size()) +
                       " box and " + std::to_string(head.scores.size()) + " score values; expected [" +
                       std::to_string(b) + ", 4, " + std::to_string(a) + "] and [" + std::to_string(b) +
                       ", " + std::to_string(nc) + ", " + std::to_string(a) + "]");
  };
  check_head(batch.one2many, "one2many");
  check_head(batch.one2one, "one2one");
  validate_ground_truth(batch.ground_truth, batch.batch, batch.num_classes);
}

void validate_ground_truth(const std::vector<std::vector<GtBox>>& ground_truth, int batch, int num_classes) {
  if (ground_truth.size() != static_cast<size_t>(batch))
    throw UsageError("loss: ground truth for " + std::to_string(ground_truth.size()) + " images, batch is " +
                     std::to_string(batch));
  for (const auto& image : ground_truth)
    for (const GtBox& g : image)
      if (g.cls < 0 || g.cls >= num_classes)
        throw UsageError("loss: ground-truth class " + std::to_string(g.cls) + " outside [0, " +
                         std::to_string(num_classes) + ")");
}

}  // namespace lab::loss
