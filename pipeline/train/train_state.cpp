// save_train_state / load_train_state (train_state.hpp): safetensors with the position as metadata text.
#include "pipeline/train/train_state.hpp"

#include <cstdio>

#include "nvrtc_runtime/errors.hpp"
#include "nvrtc_runtime/printable_text.hpp"
#include "pipeline/atomic_file.hpp"
#include "pipeline/model/batchnorm_fold.hpp"
#include "pipeline/model/model_convs.hpp"
#include "pipeline/safetensors.hpp"
#include "pipeline/train/state_tensors.hpp"

namespace lab::train {
namespace {

// Doubles as text that reads back to the same value.
std::string exact(double v) {
  char text[40];
  std::snprintf(text, sizeof text, "%.17g", v);
  return text;
}

void add_model(std::vector<SafetensorsTensor>& out, const std::string& prefix, const Yolo26Model& model) {
  for_each_conv(model, [&](const ConvSpec& conv) {
    for (const auto& [name, values] : state_tensors(conv))
      out.push_back(f32_tensor(prefix + name, {int64_t(values->size())}, *values));
  });
}

void read_model(const SafetensorsFile& file, const std::string& prefix, Yolo26Model& model) {
  for_each_conv(model, [&](ConvSpec& conv) {
    for (const auto& [name, values] : state_tensors(conv)) {
      const std::string key = prefix + name;
      if (!file.contains(key)) throw UsageError(printable_path(file.path()) + ": no tensor " + key);
      *values = file.floats(key, {int64_t(values->size())});
    }
    fold_batchnorm(conv);
  });
}

double number(const std::map<std::string, std::string>& metadata, const std::string& key,
              const std::filesystem::path& path) {
  const auto it = metadata.find(key);
  if (it == metadata.end()) throw UsageError(printable_path(path) + ": no '" + key + "' in the metadata");
  try {
    size_t used = 0;
    const double v = std::stod(it->second, &used);
    if (used == it->second.size()) return v;
  } catch (const std::exception&) {
  }
  throw UsageError(printable_path(path) + ": metadata '" + key + "' is not a number");
}

}  // namespace

void save_train_state(const std::filesystem::path& path, const RunPosition& p, const Yolo26Model& model,
                      const Yolo26Model& ema, const OptimizerState& optimizer) {
  std::vector<SafetensorsTensor> tensors;
  add_model(tensors, "train/", model);
  add_model(tensors, "ema/", ema);
  for (const auto& [name, values] : optimizer.tensors)
    tensors.push_back(f32_tensor("optimizer/" + name, {int64_t(values.size())}, values));
  std::map<std::string, std::string> metadata = {{"producer", "lab train"},
                                                       {"epoch", std::to_string(p.epoch)},
                                                       {"next_batch", std::to_string(p.next_batch)},
                                                       {"loss_box", exact(p.loss_sums[0])},
                                                       {"loss_cls", exact(p.loss_sums[1])},
                                                       {"loss_l1", exact(p.loss_sums[2])},
                                                       {"last_opt_step", std::to_string(p.last_opt_step)},
                                                       {"best_fitness", exact(p.best_fitness)},
                                                       {"best_epoch", std::to_string(p.best_epoch)},
                                                       {"ema_updates", std::to_string(p.ema_updates)},
                                                       {"seconds", exact(p.seconds)},
                                                       {"results_csv", p.results_csv},
                                                       {"optimizer", optimizer.name},
                                                       {"optimizer_steps", std::to_string(optimizer.steps)}};
  if (const std::optional<LossScaleState>& s = optimizer.loss_scale) {  // fp16
    metadata["loss_scale"] = exact(s->scale);
    metadata["loss_scale_growth_tracker"] = std::to_string(s->growth_tracker);
    metadata["skipped_steps"] = std::to_string(s->skipped_steps);
  }
  write_file_atomically(
      path, [&](const std::filesystem::path& temporary) { write_safetensors(temporary, tensors, metadata); });
}

TrainState load_train_state(const std::filesystem::path& path, const Yolo26Model& structure) {
  const SafetensorsFile file = SafetensorsFile::load(path);
  const std::map<std::string, std::string>& m = file.metadata();
  TrainState state{{}, structure, structure, {}};
  RunPosition& p = state.position;
  p.epoch = int(number(m, "epoch", path));
  p.next_batch = (long long)number(m, "next_batch", path);
  p.loss_sums = {number(m, "loss_box", path), number(m, "loss_cls", path), number(m, "loss_l1", path)};
  p.last_opt_step = (long long)number(m, "last_opt_step", path);
  p.best_fitness = number(m, "best_fitness", path);
  p.best_epoch = int(number(m, "best_epoch", path));
  p.ema_updates = (long long)number(m, "ema_updates", path);
  p.seconds = number(m, "seconds", path);
  const auto csv = m.find("results_csv"), optimizer = m.find("optimizer");
  if (csv == m.end() || optimizer == m.end())
    throw UsageError(printable_path(path) +
                     ": not a training state of lab train (no results_csv / optimizer)");
  p.results_csv = csv->second;
  state.optimizer.name = optimizer->second;
  state.optimizer.steps = (long long)number(m, "optimizer_steps", path);
  if (m.count("loss_scale"))
    state.optimizer.loss_scale = LossScaleState{number(m, "loss_scale", path),
                                                (long long)number(m, "loss_scale_growth_tracker", path),
                                                (long long)number(m, "skipped_steps", path)};
  read_model(file, "train/", state.model);
  read_model(file, "ema/", state.ema);
  const std::string prefix = "optimizer/";
  for (const std::string& key : file.keys())
    if (key.rfind(prefix, 0) == 0) state.optimizer.tensors[key.substr(prefix.size())] = file.floats(key);
  return state;
}

}  // namespace lab::train
