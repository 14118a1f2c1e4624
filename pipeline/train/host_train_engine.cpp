// HostTrainEngine (host_train_engine.hpp).
#include "pipeline/train/host_train_engine.hpp"

#include <cmath>
#include <map>

#include "nvrtc_runtime/backend.hpp"
#include "nvrtc_runtime/errors.hpp"
#include "pipeline/executor/kernel_backward.hpp"
#include "pipeline/model/batchnorm_batch.hpp"
#include "pipeline/model/model_convs.hpp"
#include "pipeline/reference/reference_backward.hpp"

namespace lab::train {
namespace {

// The state tensors' name suffixes of each optimizer: State::momentum's, then State::second_moment's.
std::pair<const char*, const char*> state_suffixes(const std::string& optimizer) {
  if (optimizer == "AdamW") return {".exp_avg", ".exp_avg_sq"};
  if (optimizer == "MuSGD") return {".momentum", ".muon_momentum"};
  return {".momentum", nullptr};
}

reference::OptimizerSettings host_optimizer(const std::string& name) {
  reference::OptimizerSettings settings;
  settings.name = name;
  settings.float32_state = true;
  return settings;
}

}  // namespace

HostTrainEngine::HostTrainEngine(Yolo26Model model, const std::string& backend, const RuntimeContext& context,
                                 const std::string& optimizer)
    : model_(std::move(model)), backend_name_(backend), optimizer_(host_optimizer(optimizer)) {
  if (backend != "reference") {
    if (backend != "cpu" && backend != "cuda")
      throw UsageError("--backend " + backend + ": the host engine trains on cpu, cuda or reference");
    backend_ = make_backend(backend, context);
  }
  for_each_conv(model_, [&](ConvSpec& conv) {
    std::vector<std::string> names;
    for (const ParameterRef& p : conv_parameters(conv)) names.push_back(p.name);
    modules_.emplace_back(conv.name, std::move(names));
  });
}

HostTrainEngine::~HostTrainEngine() = default;

std::string HostTrainEngine::describe() const {
  const std::string gradients =
      backend_ ? "kernel backward (float32) on " + backend_name_ + " (" + backend_->device().name + ")"
               : "float64 reference backward";
  return gradients + ", " + optimizer_.name() + " on the host (float64)";
}

BatchLoss HostTrainEngine::accumulate(const TrainBatch& batch, const loss::LossConfig& config) {
  BatchLoss out;
  std::vector<ParameterGradient> grads;
  if (backend_) {
    TrainingGradients g = kernel_gradients(*backend_, model_, batch.planes(), batch.batch, batch.height,
                                           batch.width, batch.ground_truth, config);
    out = {g.one2many, g.one2one, g.weights, g.total};
    grads = std::move(g.parameters);
    for_each_conv(model_, [&](ConvSpec& conv) {  // BatchNorm in train mode: the kernels moved them
      if (const auto it = g.running_statistics.find(conv.name); it != g.running_statistics.end()) {
        conv.bn->mean = it->second.mean, conv.bn->var = it->second.var;
        fold_batchnorm(conv);
      }
    });
  } else {
    reference::RefTensor input(batch.batch, 3, batch.height, batch.width);
    input.values = batch.planes();
    reference::NetworkGradients g = reference::reference_gradients(model_, input, batch.ground_truth, config);
    out = {g.loss.one2many, g.loss.one2one, g.loss.weights, g.loss.total};
    grads = std::move(g.parameters);
    for_each_conv(model_, [&](ConvSpec& conv) {  // BatchNorm in train mode: every forward moves them
      if (const auto it = g.batch_statistics.find(conv.name); it != g.batch_statistics.end())
        update_running_statistics(conv, it->second.stats, it->second.count, kBatchNormMomentum);
    });
  }
  if (accumulated_.empty()) {
    accumulated_ = std::move(grads);
    return out;
  }
  for (size_t i = 0; i < grads.size(); ++i)
    for (size_t j = 0; j < grads[i].values.size(); ++j) accumulated_[i].values[j] += grads[i].values[j];
  return out;
}

double HostTrainEngine::step(const StepHyper& hyper) {
  if (accumulated_.empty()) throw RuntimeError("train engine: step() without accumulated gradients");
  const reference::GroupHyper group{hyper.lr, hyper.momentum, hyper.weight_decay, hyper.max_norm};
  const double norm = optimizer_.step(model_, accumulated_, group);
  accumulated_.clear();
  return norm;
}

std::vector<std::pair<std::string, double>> HostTrainEngine::gradient_norms() const {
  std::map<std::string, const ParameterGradient*> by_name;
  for (const ParameterGradient& g : accumulated_) by_name[g.name] = &g;
  std::vector<std::pair<std::string, double>> norms;
  if (accumulated_.empty()) return norms;
  for (const auto& [module, parameters] : modules_) {
    double squares = 0;
    for (const std::string& name : parameters)
      if (const auto it = by_name.find(name); it != by_name.end())
        for (double v : it->second->values) squares += v * v;
    norms.emplace_back(module, std::sqrt(squares));
  }
  return norms;
}

void HostTrainEngine::read_parameters(Yolo26Model& model) const {
  model = model_;
}

OptimizerState HostTrainEngine::optimizer_state() const {
  OptimizerState out{optimizer_.name(), optimizer_.steps(), {}};
  const auto [first, second] = state_suffixes(optimizer_.name());
  for (const auto& [name, s] : optimizer_.state()) {
    out.tensors[name + first] = std::vector<float>(s.momentum.begin(), s.momentum.end());
    if (second && !s.second_moment.empty())
      out.tensors[name + second] = std::vector<float>(s.second_moment.begin(), s.second_moment.end());
  }
  return out;
}

void HostTrainEngine::load_optimizer_state(const OptimizerState& state) {
  if (state.name != optimizer_.name())
    throw UsageError("optimizer state of " + state.name + " cannot resume " + optimizer_.name());
  const auto [first, second] = state_suffixes(optimizer_.name());
  std::map<std::string, reference::ReferenceOptimizer::State> restored;
  size_t used = 0;
  auto take = [&](const std::string& key, size_t size, std::vector<double>& into) {
    const auto it = state.tensors.find(key);
    if (it == state.tensors.end()) return;
    if (it->second.size() != size)
      throw UsageError("optimizer state: " + key + " has " + std::to_string(it->second.size()) +
                       " values, the parameter " + std::to_string(size));
    into.assign(it->second.begin(), it->second.end());
    ++used;
  };
  for_each_conv(model_, [&](ConvSpec& conv) {
    for (const ParameterRef& p : conv_parameters(conv)) {
      reference::ReferenceOptimizer::State s;
      take(p.name + first, p.values->size(), s.momentum);
      if (second) take(p.name + second, p.values->size(), s.second_moment);
      if (state.steps > 0 && s.momentum.empty())
        throw UsageError("optimizer state: no " + p.name + first + " after " + std::to_string(state.steps) +
                         " steps");
      if (!s.momentum.empty()) restored[p.name] = std::move(s);
    }
  });
  if (used != state.tensors.size())
    throw UsageError("optimizer state: " + std::to_string(state.tensors.size() - used) +
                     " tensors name no parameter of the model");
  optimizer_.restore(int(state.steps), std::move(restored));
}

}  // namespace lab::train
