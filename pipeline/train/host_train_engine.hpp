// TrainEngine on the host: each batch's gradients from the kernel backward (pipeline/executor/
// kernel_backward: our float32 kernels on the cpu emulator or cuda) or the float64 reference backward
// (backend "reference"), accumulated in float64 per checkpoint parameter; the step is the float64 reference
// optimizer (clip, then SGD / AdamW / MuSGD with the schedule's per-group lr and momentum) on the model's
// float32 parameters, which are then refolded. The optimizer state is kept float32 between steps as torch
// keeps it, so a saved state resumes exactly. A model marked for batch-statistics BatchNorm
// (set_batchnorm_mode) also moves its running statistics after every forward (by the float64 reference's
// update, or by the kernels' on cpu / cuda), then refolds them.
#pragma once
#include <memory>
#include <string>

#include "nvrtc_runtime/runtime_context.hpp"
#include "pipeline/reference/reference_optimizer.hpp"
#include "pipeline/train/train_engine.hpp"

namespace lab::train {

class HostTrainEngine : public TrainEngine {
 public:
  // `backend`: "reference", "cpu" or "cuda" (UsageError otherwise, or for cuda without a device);
  // `optimizer`: "SGD", "AdamW" or "MuSGD".
  HostTrainEngine(Yolo26Model model, const std::string& backend, const RuntimeContext& context,
                  const std::string& optimizer);
  ~HostTrainEngine() override;

  std::string describe() const override;
  BatchLoss accumulate(const TrainBatch& batch, const loss::LossConfig& config) override;
  double step(const StepHyper& hyper) override;
  std::vector<std::pair<std::string, double>> gradient_norms() const override;
  void read_parameters(Yolo26Model& model) const override;
  OptimizerState optimizer_state() const override;
  void load_optimizer_state(const OptimizerState& state) override;

 private:
  Yolo26Model model_;
  std::string backend_name_;
  std::unique_ptr<Backend> backend_;  // null for the reference
  reference::ReferenceOptimizer optimizer_;
  std::vector<ParameterGradient> accumulated_;  // for_each_conv order; empty after a step
  std::vector<std::pair<std::string, std::vector<std::string>>> modules_;  // conv name -> its parameters
};

}  // namespace lab::train
