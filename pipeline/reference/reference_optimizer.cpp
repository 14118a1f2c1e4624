// ReferenceOptimizer: clip scale from the total norm of every gradient, then per parameter its group's decay
// (BaseTrainer.build_optimizer: decay for weights, none for BatchNorm weights and biases) and the step.
#include "pipeline/reference/reference_optimizer.hpp"

#include "kernels/optim/optim_reference.hpp"
#include "pipeline/loss/loss_reference.hpp"
#include "nvrtc_runtime/errors.hpp"
#include "pipeline/model/model_convs.hpp"
#include "pipeline/reference/reference_backward.hpp"

namespace lab::reference {

namespace {

bool ends_with(const std::string& s, const std::string& tail) {
  return s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
}

// Group 0 of Ultralytics (weights, decayed): conv.weight and a plain Conv2d's weight; not bn.weight.
bool decays(const std::string& name) {
  return ends_with(name, "weight") && !ends_with(name, ".bn.weight");
}

}  // namespace

ReferenceOptimizer::ReferenceOptimizer(OptimizerSettings settings) : settings_(std::move(settings)) {
  if (settings_.name != "SGD" && settings_.name != "AdamW")
    throw UsageError("optimizer '" + settings_.name + "': the reference steps SGD or AdamW");
}

void ReferenceOptimizer::step(Yolo26Model& model, const std::vector<ParameterGradient>& grads) {
  std::map<std::string, const ParameterGradient*> by_name;
  std::vector<std::vector<double>> all;
  for (const ParameterGradient& g : grads) {
    by_name[g.name] = &g;
    all.push_back(g.values);
  }
  const double clip = clip_scale_reference(total_grad_norm_reference(all), settings_.max_norm);
  ++steps_;
  for_each_conv(model, [&](ConvSpec& conv) {
    for (const ParameterRef& p : conv_parameters(conv)) {
      const auto it = by_name.find(p.name);
      if (it == by_name.end()) throw RuntimeError("reference optimizer: no gradient for " + p.name);
      std::vector<double> grad = it->second->values, param(p.values->begin(), p.values->end());
      for (double& g : grad) g *= clip;
      const double decay = decays(p.name) ? settings_.weight_decay : 0.0;
      State& s = state_[p.name];
      if (settings_.name == "SGD")
        sgd_nesterov_reference_step(param, s.momentum, grad, settings_.lr, settings_.momentum, decay, steps_);
      else
        adamw_reference_step(param, s.momentum, s.second_moment, grad, settings_.lr, settings_.momentum,
                             0.999, 1e-8, decay, steps_);
      for (size_t i = 0; i < param.size(); ++i) (*p.values)[i] = float(param[i]);
    }
    fold_batchnorm(conv);
  });
}

std::vector<double> reference_step_losses(Yolo26Model model, const RefTensor& input,
                                          const std::vector<std::vector<loss::GtBox>>& ground_truth,
                                          const loss::LossConfig& config, const OptimizerSettings& settings,
                                          int steps, const std::function<void(int, double)>& on_loss) {
  ReferenceOptimizer optimizer(settings);
  std::vector<double> losses;
  for (int step = 0;; ++step) {
    if (step == steps) {  // the last loss needs no gradients
      const NetworkTrace trace = trace_network(model, input);
      losses.push_back(loss::reference_loss(loss_batch(model, trace, ground_truth), config).total);
      if (on_loss) on_loss(step, losses.back());
      return losses;
    }
    const NetworkGradients g = reference_gradients(model, input, ground_truth, config);
    losses.push_back(g.loss.total);
    if (on_loss) on_loss(step, losses.back());
    optimizer.step(model, g.parameters);
  }
}

}  // namespace lab::reference
