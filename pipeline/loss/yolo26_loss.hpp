// Yolo26Loss: the YOLO26 end-to-end training loss (Ultralytics E2ELoss) for both heads, with the gradients
// of the total with respect to every raw head output. The task-aligned assignment, the L1 distance term and
// the chain rule from XYWH to the raw l, t, r, b distances run on the host; the CIoU box term and the BCE
// class term (forward and backward) run on the loss kernels through CiouOp / ClsBceOp on the given Backend.
#pragma once
#include "kernels/loss/loss_ops.hpp"
#include "pipeline/loss/loss_types.hpp"

namespace lab::loss {

class Yolo26Loss {
 public:
  // Compiles the loss kernels on `backend` (once; later calls only launch).
  explicit Yolo26Loss(Backend& backend, LossConfig config = {});
  // Throws UsageError when the batch is inconsistent (validate_batch).
  LossResult compute(const LossBatch& batch) const;
  const LossConfig& config() const { return config_; }

 private:
  // One head's components (after gains, per image) and its gradients scaled by `grad_scale`
  // (batch size times the head's weight).
  HeadLoss head_loss(const LossBatch& batch, const HeadOutputs& head, const AssignerSettings& settings,
                     double grad_scale, HeadGradients<float>& grads) const;

  Backend& backend_;
  LossConfig config_;
  CiouOp ciou_;
  ClsBceOp bce_;
};

}  // namespace lab::loss
