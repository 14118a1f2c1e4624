// The kernel backward of the whole YOLO26 network: the forward of every layer and both heads on our kernels
// through a GradientTape (the modules as spec/yolo26.md and the float64 reference's traced forward build
// them), the loss on the device (Yolo26Loss: d total / d both heads' raw outputs), the tape's backward, and
// the gradients reported in the checkpoint's own parameters (the per-channel BatchNorm chain rule on the
// host). BatchNorm frozen; the one-to-one head reads detached features (no gradient from it reaches the
// backbone and neck), as Ultralytics' end-to-end head in training. Float32 kernels on either backend.
#pragma once
#include <vector>

#include "nvrtc_runtime/backend.hpp"
#include "pipeline/loss/loss_types.hpp"
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
};

// Forward, loss and backward of one batch: `input` [batch, 3, height, width] (letterboxed, 0..1), one
// ground-truth list per image. UsageError when the model has no one-to-many head or the size is not a
// multiple of the largest stride.
TrainingGradients kernel_gradients(Backend& backend, const Yolo26Model& model,
                                   const std::vector<float>& input, int batch, int height, int width,
                                   const std::vector<std::vector<loss::GtBox>>& ground_truth,
                                   const loss::LossConfig& config);

}  // namespace lab
