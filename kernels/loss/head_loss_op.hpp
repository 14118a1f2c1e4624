// HeadLossOp: one head's YOLO26 loss over a batch with all data on the device: the assignment
// (TalAssignOp), the CIoU term (CiouOp over every anchor of the batch, background weighted 0), the L1 term,
// the chain rule to the raw distances and the classification BCE (head_loss.cu). Only the five sums cross to
// the host (sums(), or download_sums_async() and sums_from()). The launches are asynchronous; sums() waits
// for them.
#pragma once
#include "kernels/loss/loss_ops.hpp"
#include "kernels/loss/tal_assign_op.hpp"

namespace lab {

const KernelSpec& head_loss_spec();

struct HeadLossGains {
  double box = 7.5, cls = 0.5, l1 = 1.5;
  double grad_scale = 1;  // the head's weight in the total: batch size times the epoch weight
};

// Sums over the batch, before the gains and the normaliser.
struct HeadLossSums {
  double target_score_sum = 0;  // raw; the normaliser is max(target_score_sum, 1)
  double box = 0;               // sum of (1 - CIoU) * w over the positives
  double cls = 0;               // BCE summed over every anchor and class
  double l1 = 0;                // sum of mean |diff| * w over the positives
  int positives = 0;
};

// One head's device inputs: boxes [B, 4, A], logits [B, classes, A] of a (height x width) input.
struct HeadLossInputs {
  const DeviceBuffer& boxes;
  const DeviceBuffer& logits;
  int classes = 0, image_height = 0, image_width = 0;
  const DeviceAnchorGrid& anchors;
  const DeviceGroundTruth& gts;
};

struct HeadLossWorkspace {
  TalAssignment assignment;
  DeviceBuffer pred_xywh, target_xywh, box_dy, d_xywh, terms, sums;  // sums: box, cls, l1, positives
  CiouSaved ciou;
};

class HeadLossOp {
 public:
  explicit HeadLossOp(Backend& backend, int block_n = 256);
  HeadLossWorkspace allocate(int batch, int max_gts, int anchors) const;
  // Writes d total / d boxes and d total / d logits (d_boxes [B, 4, A], d_logits [B, classes, A]); UsageError
  // when sizes disagree. assign() then launch_terms().
  void launch(const HeadLossInputs& in, const loss::AssignerSettings& settings, const HeadLossGains& gains,
              HeadLossWorkspace& ws, const DeviceBuffer& d_boxes, const DeviceBuffer& d_logits) const;
  // The two halves of launch(): the assignment (ws.assignment, with its target_score_sum), then the terms,
  // gradients and sums, which read the normaliser from ws.assignment.target_score_sum. Between them a
  // data-parallel loss replaces that sum by the sum over every rank (Yolo26Loss).
  void assign(const HeadLossInputs& in, const loss::AssignerSettings& settings, HeadLossWorkspace& ws) const;
  void launch_terms(const HeadLossInputs& in, const HeadLossGains& gains, HeadLossWorkspace& ws,
                    const DeviceBuffer& d_boxes, const DeviceBuffer& d_logits) const;
  // Waits for the launches and downloads the sums.
  HeadLossSums sums(const HeadLossWorkspace& ws) const;
  // The sums' copy to the host on the current lane (Backend::download_async) into `host`, kSumValues doubles
  // (page-locked for the host to go on at once); once the host has waited for that lane, sums_from(host).
  static constexpr int kSumValues = 5;  // the target-score sum, then box, cls, l1, positives
  void download_sums_async(const HeadLossWorkspace& ws, double* host) const;
  static HeadLossSums sums_from(const double* host);

 private:
  Backend& backend_;
  int block_n_;
  TalAssignOp assign_;
  CiouOp ciou_;
  std::shared_ptr<Module> module_;
  Kernel box_targets_, box_terms_, cls_terms_, row_sums_;
};

}  // namespace lab
