// Ultralytics' optimizers in float64 on a model's checkpoint parameters, as its BaseTrainer builds them for
// a fine-tuning step: three parameter groups (weights with decay; BatchNorm weights and every bias without),
// the gradient norm clipped at 10 (torch.nn.utils.clip_grad_norm_), then SGD with Nesterov momentum, AdamW
// or MuSGD (kernels/optim's float64 reference steps), each group at its own learning rate when the training
// schedule sets them. Parameters stay float32 in the model, as in PyTorch; each updated Conv is refolded with
// its frozen BatchNorm.
#pragma once
#include <array>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "pipeline/model/batchnorm_fold.hpp"
#include "pipeline/loss/loss_types.hpp"
#include "pipeline/model/yolo26_model.hpp"
#include "pipeline/reference/ref_tensor.hpp"

namespace lab::reference {

struct OptimizerSettings {
  std::string name = "AdamW";  // "SGD" (Nesterov), "AdamW" or "MuSGD" (Muon on weights, muon 0.5, sgd 0.5)
  double lr = 0.000119;
  double momentum = 0.9;  // SGD momentum, AdamW beta1 (beta2 0.999, eps 1e-8)
  double weight_decay = 5e-4;
  double max_norm = 10;
  // Round the state to float32 after each step, as torch keeps it for float32 parameters (what a saved
  // optimizer state holds, so that a resumed run continues exactly).
  bool float32_state = false;
};

// Ultralytics' parameter group of a checkpoint parameter: 0 weights (decayed), 1 BatchNorm weights, 2 biases.
int parameter_group(const std::string& name);

// One step's group settings, as the training schedule moves them.
struct GroupHyper {
  std::array<double, 3> lr{};
  double momentum = 0.9;
  double weight_decay = 5e-4;  // group 0 only
  double max_norm = 10;
};

class ReferenceOptimizer {
 public:
  struct State {
    // SGD: momentum only; AdamW: exp_avg, exp_avg_sq; MuSGD: the SGD buffer and the Muon buffer.
    std::vector<double> momentum, second_moment;
  };

  // UsageError for a name other than SGD, AdamW or MuSGD.
  explicit ReferenceOptimizer(OptimizerSettings settings);
  // One step from d loss / d every parameter of `model` (parameter_gradients' names), at the settings' lr and
  // momentum in every group.
  void step(Yolo26Model& model, const std::vector<ParameterGradient>& grads);
  // The same with per-group settings; returns the gradient's L2 norm before clipping.
  double step(Yolo26Model& model, const std::vector<ParameterGradient>& grads, const GroupHyper& hyper);

  const std::string& name() const { return settings_.name; }
  int steps() const { return steps_; }
  const std::map<std::string, State>& state() const { return state_; }
  // A saved state put back (a resumed run).
  void restore(int steps, std::map<std::string, State> state);

 private:
  OptimizerSettings settings_;
  std::map<std::string, State> state_;
  int steps_ = 0;
};

// The loss (total) before and after each of `steps` optimizer steps on one batch: forward, loss and backward
// (reference_gradients), then the step; `on_loss(step, loss)` is told each one as it comes (step 0: before
// any). `model` is a copy: the caller's stays as it is.
std::vector<double> reference_step_losses(Yolo26Model model, const RefTensor& input,
                                          const std::vector<std::vector<loss::GtBox>>& ground_truth,
                                          const loss::LossConfig& config, const OptimizerSettings& settings,
                                          int steps, const std::function<void(int, double)>& on_loss = {});

}  // namespace lab::reference
