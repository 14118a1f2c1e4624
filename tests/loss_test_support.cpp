// torch_float32_cls: our float64 reference assignment, PyTorch's float32 per-element formula.
#include "tests/loss_test_support.hpp"

#include <algorithm>
#include <cmath>

#include "pipeline/loss/loss_reference.hpp"

namespace lab::loss {

double torch_float32_cls(const LossBatch& batch, const HeadOutputs& head, const AssignerSettings& settings) {
  const ReferenceDetached d = reference_detached(batch, to_reference(head), settings);
  const size_t a = batch.anchors.size();
  double sum = 0;
  for (int c = 0; c < batch.num_classes; ++c)
    for (size_t i = 0; i < a; ++i) {
      const int g = d.gt_of_anchor[0][i];
      const float t =
          g >= 0 && batch.ground_truth[0][g].cls == c ? static_cast<float>(d.target_score[0][i]) : 0.0f;
      const float x = head.scores[c * a + i];
      const float log_sigmoid = std::min(x, 0.0f) - std::log1p(std::exp(-std::fabs(x)));
      sum += (1.0f - t) * x - log_sigmoid;
    }
  return sum / d.target_score_sum * LossConfig{}.cls_gain;
}

}  // namespace lab::loss
