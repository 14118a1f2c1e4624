// ReferenceOptimizer: clip scale from the total norm of every gradient, then per parameter its group's lr and
// decay (BaseTrainer.build_optimizer: decay for weights, none for BatchNorm weights and biases) and the step;
// MuSGD gives every 4-D weight Muon's update viewed [c_out, rest].
#include "pipeline/reference/reference_optimizer.hpp"

#include "kernels/optim/musgd_op.hpp"
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

void round_to_float(std::vector<double>& values) {
  for (double& v : values) v = double(float(v));
}

}  // namespace

// Group 0 of Ultralytics (weights, decayed): conv.weight and a plain Conv2d's weight; 1: bn.weight; 2: biases.
int parameter_group(const std::string& name) {
  if (ends_with(name, ".bn.weight")) return 1;
  return ends_with(name, "weight") ? 0 : 2;
}

ReferenceOptimizer::ReferenceOptimizer(OptimizerSettings settings) : settings_(std::move(settings)) {
  if (settings_.name != "SGD" && settings_.name != "AdamW" && settings_.name != "MuSGD")
    throw UsageError("optimizer '" + settings_.name + "': the reference steps SGD, AdamW or MuSGD");
}

void ReferenceOptimizer::restore(int steps, std::map<std::string, State> state) {
  steps_ = steps;
  state_ = std::move(state);
}

void ReferenceOptimizer::step(Yolo26Model& model, const std::vector<ParameterGradient>& grads) {
  GroupHyper hyper;
  hyper.lr.fill(settings_.lr);
  hyper.momentum = settings_.momentum, hyper.weight_decay = settings_.weight_decay;
  hyper.max_norm = settings_.max_norm;
  step(model, grads, hyper);
}

double ReferenceOptimizer::step(Yolo26Model& model, const std::vector<ParameterGradient>& grads,
                                const GroupHyper& hyper) {
  std::map<std::string, const ParameterGradient*> by_name;
  std::vector<std::vector<double>> all;
  for (const ParameterGradient& g : grads) {
    by_name[g.name] = &g;
    all.push_back(g.values);
  }
  const double norm = total_grad_norm_reference(all);
  const double clip = clip_scale_reference(norm, hyper.max_norm);
  ++steps_;
  for_each_conv(model, [&](ConvSpec& conv) {
    for (const ParameterRef& p : conv_parameters(conv)) {
      const auto it = by_name.find(p.name);
      if (it == by_name.end()) throw RuntimeError("reference optimizer: no gradient for " + p.name);
      std::vector<double> grad = it->second->values, param(p.values->begin(), p.values->end());
      for (double& g : grad) g *= clip;
      const int group = parameter_group(p.name);
      const double lr = hyper.lr[size_t(group)], decay = group == 0 ? hyper.weight_decay : 0.0;
      State& s = state_[p.name];
      if (settings_.name == "SGD") {
        sgd_nesterov_reference_step(param, s.momentum, grad, lr, hyper.momentum, decay, steps_);
      } else if (settings_.name == "AdamW") {
        adamw_reference_step(param, s.momentum, s.second_moment, grad, lr, hyper.momentum, 0.999, 1e-8, decay,
                             steps_);
      } else {
        const std::vector<int64_t>& shape = it->second->shape;
        const bool muon = group == 0 && shape.size() >= 2;
        const int rows = muon ? int(shape[0]) : 0, cols = muon ? int(param.size() / size_t(shape[0])) : 0;
        const MusgdSettings factors;  // muon.py's muon 0.5, sgd 0.5
        musgd_reference_step(param, s.momentum, s.second_moment, grad, rows, cols,
                             muon ? muon_update_scale(shape) : 1.0, lr, hyper.momentum, decay, factors.muon,
                             factors.sgd);
      }
      if (settings_.float32_state) round_to_float(s.momentum), round_to_float(s.second_moment);
      for (size_t i = 0; i < param.size(); ++i) (*p.values)[i] = float(param[i]);
    }
    fold_batchnorm(conv);
  });
  return norm;
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
