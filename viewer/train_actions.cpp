// Train panel actions: the request's settings checked as they are set, the session's controls, and the plot
// series rebuilt from each new copy of the progress.
#include "viewer/train_actions.hpp"

#include <algorithm>

#include "nvrtc_runtime/errors.hpp"

namespace lab::viewer {

namespace {

int positive_setting(const std::string& name, const std::string& value) {
  try {
    size_t used = 0;
    const int v = std::stoi(value, &used);
    if (used == value.size() && v >= 1) return v;
  } catch (const std::exception&) {
  }
  throw UsageError("train setting " + name + ": expected a positive whole number, got '" + value + "'");
}

TrainSession& session(ViewerState& s) {
  if (!s.train.session) s.train.session = std::make_unique<TrainSession>(s.workspace.context);
  return *s.train.session;
}

// The plot series of the steps so far: the loss components of both heads (per image, after gains), their
// weighted sum, the learning rate of each parameter group and the gradient norm before clipping.
void rebuild_curves(TrainState& t) {
  using Pick = double (*)(const TrainStepRecord&);
  static const std::vector<std::pair<std::string, Pick>> picks = {
      {"o2m box", [](const TrainStepRecord& r) { return r.loss.one2many.box; }},
      {"o2m cls", [](const TrainStepRecord& r) { return r.loss.one2many.cls; }},
      {"o2m l1", [](const TrainStepRecord& r) { return r.loss.one2many.l1; }},
      {"o2o box", [](const TrainStepRecord& r) { return r.loss.one2one.box; }},
      {"o2o cls", [](const TrainStepRecord& r) { return r.loss.one2one.cls; }},
      {"o2o l1", [](const TrainStepRecord& r) { return r.loss.one2one.l1; }},
      {"weighted sum",
       [](const TrainStepRecord& r) {
         return r.loss.weights.one2many * r.loss.one2many.sum() +
                r.loss.weights.one2one * r.loss.one2one.sum();
       }},
      {"lr pg0 (weights)", [](const TrainStepRecord& r) { return r.lr[0]; }},
      {"lr pg1 (norm weights)", [](const TrainStepRecord& r) { return r.lr[1]; }},
      {"lr pg2 (biases)", [](const TrainStepRecord& r) { return r.lr[2]; }}};
  t.curves.clear();
  for (const auto& [name, pick] : picks) {
    std::vector<float> values;
    values.reserve(t.progress.steps.size());
    for (const TrainStepRecord& r : t.progress.steps) values.push_back(static_cast<float>(pick(r)));
    t.curves.emplace_back(name, std::move(values));
  }
  std::vector<float> norms;  // at the optimizer steps only
  for (const TrainStepRecord& r : t.progress.steps)
    if (r.stepped) norms.push_back(static_cast<float>(r.gradient_norm));
  t.curves.emplace_back("gradient norm (optimizer steps)", std::move(norms));
}

}  // namespace

void set_train_setting(ViewerState& s, const std::string& name, const std::string& value) {
  TrainRequest& r = s.train.request;
  if (name == "data") {
    r.data_yaml = value;
  } else if (name == "model") {
    r.model = value;
  } else if (name == "epochs") {
    r.epochs = positive_setting(name, value);
  } else if (name == "batch") {
    r.batch = positive_setting(name, value);
  } else if (name == "imgsz") {
    r.imgsz = positive_setting(name, value);
  } else if (name == "nbs") {
    r.nbs = positive_setting(name, value);
  } else if (name == "project") {
    r.project = value;
  } else if (name == "every") {
    r.assignment_every = positive_setting(name, value);
  } else if (name == "backend") {
    if (value != "reference" && std::find(s.backends.begin(), s.backends.end(), value) == s.backends.end())
      throw UsageError("train setting backend: '" + value + "' is not usable here");
    r.backend = value;
  } else {
    throw UsageError("unknown train setting '" + name +
                     "' (data, model, epochs, batch, imgsz, nbs, backend, project, every)");
  }
}

void start_training(ViewerState& s) {
  session(s).start(s.train.request);
  s.train.wait_steps = 0;
}

void pause_training(ViewerState& s) {
  session(s).pause();
}

void resume_training(ViewerState& s) {
  session(s).resume();
}

void stop_training(ViewerState& s) {
  session(s).stop();
}

void refresh_assignment(ViewerState& s) {
  session(s).request_assignment(s.train.request);
}

void poll_training(ViewerState& s) {
  TrainState& t = s.train;
  if (!t.session || t.session->version() == t.progress.version) return;
  t.progress = t.session->progress();
  rebuild_curves(t);
}

bool training_busy(const ViewerState& s) {
  const TrainState& t = s.train;
  if (!t.session) return false;
  const TrainProgress& p = t.progress;
  const bool active =
      p.phase == TrainPhase::starting || p.phase == TrainPhase::running || p.phase == TrainPhase::paused;
  const bool pausing = p.pause_requested && p.phase != TrainPhase::paused;
  return (active && (p.stop_requested || pausing)) || p.assignment_pending ||
         (active && p.phase != TrainPhase::paused && p.steps.size() < t.wait_steps);
}

}  // namespace lab::viewer
