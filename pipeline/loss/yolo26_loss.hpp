// Yolo26Loss: the YOLO26 end-to-end training loss (Ultralytics E2ELoss) for both heads, with the gradients
// of the total with respect to every raw head output. Two paths (docs/loss.md):
//   device (default): everything on the Backend's kernels (HeadLossOp: the task-aligned assignment of
//     tal_assign.cu, the CIoU, L1, chain rule and BCE terms of ciou.cu / head_loss.cu); the head outputs and
//     the gradients stay in device buffers (compute_device), only the labels go up and the sums come down.
//   host: the float64 host assigner, the L1 term and the chain rule on the host; CIoU and BCE on the kernels
//     through CiouOp / ClsBceOp. Kept as the second implementation the device path is checked against.
#pragma once
#include <functional>
#include <memory>

#include "kernels/loss/head_loss_op.hpp"
#include "kernels/loss/loss_ops.hpp"
#include "pipeline/loss/loss_types.hpp"

namespace lab::loss {

enum class LossPath { device, host };
const char* loss_path_name(LossPath path);  // "device" or "host"

// Raw outputs of one head in device buffers: boxes [B, 4, A], scores [B, nc, A] (float).
struct DeviceHeadOutputs {
  const DeviceBuffer* boxes = nullptr;
  const DeviceBuffer* scores = nullptr;
};

// Data-parallel training: sums `count` host values in place over every rank (Communicator::
// all_reduce_sum_host); every rank calls it the same number of times with the same counts.
using SumOverRanks = std::function<void(double* values, size_t count)>;

struct DeviceLossBatch {
  int batch = 1;
  int num_classes = 80;
  int image_height = 640, image_width = 640;  // network input, pixels
  DeviceHeadOutputs one2many, one2one;
  std::vector<std::vector<GtBox>> ground_truth;  // one list per image
  // Set: this batch is one rank's share of a batch split over ranks. The loss is then the whole batch's
  // (docs/distributed.md): each head's normaliser is the target-score sum over every rank, the `batch *`
  // factor the images over every rank, and the components the whole batch's; the gradients are this rank's
  // share of the whole loss's, so that their sum over the ranks is its gradient.
  SumOverRanks sum_over_ranks;
};

// The components as LossResult has them; the gradients d total / d raw outputs in device buffers laid out
// like the inputs.
struct DeviceLossResult {
  HeadLoss one2many, one2one;
  HeadWeights weights;
  double total = 0;
  DeviceBuffer d_one2many_boxes, d_one2many_scores, d_one2one_boxes, d_one2one_scores;
};

class Yolo26Loss {
 public:
  // Compiles the loss kernels of `path` on `backend` (once; later calls only launch).
  explicit Yolo26Loss(Backend& backend, LossConfig config = {}, LossPath path = LossPath::device);
  // Waits for a launch that was never finished: its copies write into the loss's page-locked buffers.
  ~Yolo26Loss();
  // Throws UsageError when the batch is inconsistent (validate_batch). On the device path the head outputs
  // are uploaded and the gradients downloaded around compute_device.
  LossResult compute(const LossBatch& batch) const;
  // The device path on device-resident head outputs; UsageError when the sizes, classes or ground truth
  // disagree.
  DeviceLossResult compute_device(const DeviceLossBatch& batch) const;
  // The same into `result`, whose gradient buffers are reused when large enough (allocated otherwise), as
  // are the loss's own workspaces between calls: a training loop that keeps one result allocates nothing
  // after its first step (unless a batch brings more gts per image than any before). Not for concurrent use.
  // The gradients are d (gradient_scale * total) (fp16 training's loss scale); the components are unscaled.
  void compute_device_into(const DeviceLossBatch& batch, DeviceLossResult& result,
                           double gradient_scale = 1.0) const;
  // compute_device_into() in two halves, so that launches made between them (the backward, reading the
  // gradients) are queued before the host waits for the loss: launch_device_into() launches the loss and the
  // copy of its sums to the host on lane kReadbackLane; finish_device() waits for that copy and sets the
  // components and the total (UsageError without a launch before it).
  static constexpr int kReadbackLane = 7;
  void launch_device_into(const DeviceLossBatch& batch, DeviceLossResult& result,
                          double gradient_scale = 1.0) const;
  void finish_device(DeviceLossResult& result) const;
  const LossConfig& config() const { return config_; }
  LossPath path() const { return path_; }

 private:
  // Host path: one head's components (after gains, per image) and its gradients scaled by `grad_scale`
  // (batch size times the head's weight).
  HeadLoss host_head_loss(const LossBatch& batch, const HeadOutputs& head, const AssignerSettings& settings,
                          double grad_scale, HeadGradients<float>& grads) const;
  LossResult compute_host(const LossBatch& batch) const;

  // Device path: the anchor grid, the ground truth's buffers and both heads' workspaces, kept for the next
  // call of the same sizes.
  struct DeviceWorkspace {
    int height = 0, width = 0, batch = 0, max_gts = 0;
    DeviceAnchorGrid anchors;
    DeviceGroundTruth ground_truth;
    HeadLossWorkspace one2many, one2one;
    // The ground truth's bytes on their way up (page-locked). Between launch_device_into() and
    // finish_device(): both heads' sums as they come to the host, the images the total counts and the
    // ranks' sum, if any.
    HostBuffer ground_truth_staging, sums;
    double images = 0;
    SumOverRanks sum_over_ranks;
    bool sums_pending = false;
  };
  DeviceWorkspace& device_workspace(const DeviceLossBatch& batch, int max_gts) const;
  // Waits for a launch's copy of the sums, if one is pending, and closes its lane.
  void wait_for_sums() const;
  // Replaces each head's target-score sum on the device by its sum over every rank; returns the images over
  // every rank.
  double share_normalisers(const SumOverRanks& sum_over_ranks, DeviceWorkspace& ws) const;

  Backend& backend_;
  LossConfig config_;
  LossPath path_;
  mutable std::unique_ptr<DeviceWorkspace> workspace_;
  std::unique_ptr<CiouOp> ciou_;        // host path
  std::unique_ptr<ClsBceOp> bce_;       // host path
  std::unique_ptr<HeadLossOp> device_;  // device path
};

}  // namespace lab::loss
