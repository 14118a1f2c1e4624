// The kernel backward of the whole YOLO26 network: the forward of every layer and both heads on our kernels
// through a GradientTape (the modules as spec/yolo26.md and the float64 reference's traced forward build
// them), the loss on the device (Yolo26Loss: d total / d both heads' raw outputs) and the tape's backward:
// TrainingPass, built once per batch shape and run per batch (DeviceTrainEngine keeps one); kernel_gradients
// runs one and reports the gradients in the checkpoint's own parameters (the per-channel BatchNorm chain
// rule on the host). BatchNorm frozen, or normalising with the batch's statistics where the model's convs are
// marked batch_statistics (GradientTape: then conv.weight, bn.weight, bn.bias come straight from the conv and
// BatchNorm backward, and each forward moves the running statistics); the one-to-one head reads detached
// features (no gradient from it reaches the backbone and neck), as Ultralytics' end-to-end head in training.
// Float32 kernels on either backend, or 16-bit conv products (TrainingPass's precision).
#pragma once
#include <map>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "nvrtc_runtime/backend.hpp"
#include "pipeline/executor/gradient_tape.hpp"
#include "pipeline/loss/loss_types.hpp"
#include "pipeline/loss/yolo26_loss.hpp"
#include "pipeline/model/batchnorm_fold.hpp"
#include "pipeline/model/yolo26_model.hpp"

namespace lab {

// The loss of one batch and d total / d every checkpoint parameter.
struct TrainingGradients {
  loss::HeadLoss one2many, one2one;
  loss::HeadWeights weights;
  double total = 0;
  std::vector<ParameterGradient> parameters;  // for_each_conv order, as the reference's
  double norm = 0;                            // L2 norm over all of them
  // Batch-statistics convs: the running statistics after the forward moved them (by conv name).
  std::map<std::string, GradientTape::RunningStatistics> running_statistics;
};

// The network's forward, loss and backward at one batch shape, built once: the tape of every layer and both
// heads (its convs read the weights `model` has at construction until their owner rewrites them: see
// GradientTape::convs), a loss kept per LossConfig and its result's buffers. `model` must outlive it.
// UsageError as kernel_gradients.
class TrainingPass {
 public:
  // `precision`: the convs' arithmetic (GradientTape's); gradients stay float32.
  TrainingPass(Backend& backend, const Yolo26Model& model, int batch, int height, int width,
               Precision precision = Precision::Fp32);
  // Forward, loss and backward of `input` [batch, 3, height, width]: the loss's components come back, the
  // gradients (of loss_scale * total: fp16 training's loss scale) stay on the tape (GradientTape::convs).
  // With `sum_over_ranks` the batch is one rank's share of a data-parallel batch (loss::DeviceLossBatch).
  const loss::DeviceLossResult& run(const std::vector<float>& input,
                                    const std::vector<std::vector<loss::GtBox>>& ground_truth,
                                    const loss::LossConfig& config, double loss_scale = 1.0,
                                    const loss::SumOverRanks& sum_over_ranks = {});
  // The same from `pixels` [batch, height, width, 3] RGB bytes: the input is pixels / 255 in planes, uploaded
  // as bytes and converted on the device (GradientTape::set_input_pixels).
  const loss::DeviceLossResult& run(std::span<const uint8_t> pixels,
                                    const std::vector<std::vector<loss::GtBox>>& ground_truth,
                                    const loss::LossConfig& config, double loss_scale = 1.0,
                                    const loss::SumOverRanks& sum_over_ranks = {});
  // The same from those bytes already on the device (batch * height * width * 3 of them).
  const loss::DeviceLossResult& run_on_device_pixels(
      const uint8_t* device_pixels, const std::vector<std::vector<loss::GtBox>>& ground_truth,
      const loss::LossConfig& config, double loss_scale = 1.0, const loss::SumOverRanks& sum_over_ranks = {});
  GradientTape& tape() { return tape_; }
  const GradientTape& tape() const { return tape_; }
  int batch() const { return batch_; }
  int height() const { return height_; }
  int width() const { return width_; }

 private:
  // Forward, loss and backward of the input already on the tape.
  const loss::DeviceLossResult& run_on_input(const std::vector<std::vector<loss::GtBox>>& ground_truth,
                                             const loss::LossConfig& config, double loss_scale,
                                             const loss::SumOverRanks& sum_over_ranks);

  Backend& backend_;
  int batch_, height_, width_, num_classes_;
  GradientTape tape_;
  TapeTensor input_, o2m_boxes_, o2m_scores_, o2o_boxes_, o2o_scores_;
  std::unique_ptr<loss::Yolo26Loss> loss_;  // made again when the config changes (the head weights' epoch)
  loss::DeviceLossResult result_;
};

// Forward, loss and backward of one batch: `input` [batch, 3, height, width] (letterboxed, 0..1), one
// ground-truth list per image. UsageError when the model has no one-to-many head or the size is not a
// multiple of the largest stride.
TrainingGradients kernel_gradients(Backend& backend, const Yolo26Model& model,
                                   const std::vector<float>& input, int batch, int height, int width,
                                   const std::vector<std::vector<loss::GtBox>>& ground_truth,
                                   const loss::LossConfig& config);

}  // namespace lab
