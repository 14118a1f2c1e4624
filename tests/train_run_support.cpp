// The `lab train` loop tests' shared helpers (train_run_support.hpp).
#include "tests/train_run_support.hpp"

#include <catch2/catch.hpp>

#include <algorithm>

#include "pipeline/dataset/synth_dataset.hpp"
#include "pipeline/model/model_convs.hpp"
#include "tests/test_helpers.hpp"

namespace lab::test {

namespace fs = std::filesystem;

fs::path shared_yolo26n_path() {
  return fs::path(LAB_ASSETS_DIR) / "models" / "yolo26n.pt";
}

fs::path synth_train_dataset(const fs::path& root, int train, int imgsz, uint64_t seed) {
  dataset::SynthOptions o;
  o.out = root / "data", o.classes = 2, o.train = train, o.val = 1, o.imgsz = imgsz, o.seed = seed;
  dataset::write_synth_dataset(o);
  return o.out / "data.yaml";
}

std::vector<double> running_statistics(const Yolo26Model& model) {
  std::vector<double> out;
  for_each_conv(model, [&](const ConvSpec& conv) {
    if (!conv.bn) return;
    out.insert(out.end(), conv.bn->mean.begin(), conv.bn->mean.end());
    out.insert(out.end(), conv.bn->var.begin(), conv.bn->var.end());
  });
  return out;
}

train::TrainOptions plain_train_options(const fs::path& data, const fs::path& project,
                                        const std::string& backend) {
  train::TrainOptions o;
  o.data = data.string(), o.model = shared_yolo26n_path().string(), o.project = project.string();
  o.imgsz = 32, o.epochs = 8, o.batch = 3, o.nbs = 3, o.workers = 0, o.val = false;
  o.augment = train::AugmentSettings::none();
  o.warmup_epochs = 0, o.optimizer = "AdamW", o.lr0 = 0.0015, o.backend = backend;
  return o;
}

train::TrainHooks recording(RecordedRun& r, long long stop_after) {
  train::TrainHooks hooks;
  hooks.on_step = [&r](const train::StepReport& s) { r.steps.push_back(s); };
  hooks.on_epoch = [&r](const train::EpochReport& e) { r.epochs.push_back(e); };
  hooks.should_stop = [&r, stop_after] { return (long long)r.steps.size() == stop_after; };
  return hooks;
}

void check_usage_error(const std::string& args, const std::string& message) {
  const LabResult r = run_lab(args);
  INFO(args << " -> " << r.err);
  CHECK(r.exit_code == 2);
  CHECK(contains(r.err, message));
  CHECK(std::count(r.err.begin(), r.err.end(), '\n') == 1);
}

}  // namespace lab::test
