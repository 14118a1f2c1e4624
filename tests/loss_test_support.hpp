// What the loss goldens' tests share: the golden's float32 classification term (see test_loss_e2e_bus.cpp
// and docs/loss.md: PyTorch's float32 BCEWithLogits cancels very negative logits' terms to exactly 0).
#pragma once
#include "pipeline/loss/loss_types.hpp"

namespace lab::loss {

// PyTorch's float32 BCEWithLogits sum, (1 - t) * x - log_sigmoid(x) per element, over one head with the
// targets of our reference assignment, normalised and scaled like cls_loss.
double torch_float32_cls(const LossBatch& batch, const HeadOutputs& head, const AssignerSettings& settings);

}  // namespace lab::loss
