// The host training engine and what it builds on (pipeline/train/host_train_engine, class_reinit,
// train_state; pipeline/reference/reference_optimizer's per-group step): accumulation equals the summed
// reference gradients, per-group learning rates reach only their group, the optimizer state and the
// training state round-trip, and the class branches are rebuilt with the dataset's class count.
#include <catch2/catch.hpp>
#include <cmath>
#include <map>
#include <random>

#include "kernels/optim/optim_reference.hpp"
#include "nvrtc_runtime/errors.hpp"
#include "pipeline/model/batchnorm_batch.hpp"
#include "pipeline/model/model_convs.hpp"
#include "pipeline/reference/reference_backward.hpp"
#include "pipeline/reference/reference_optimizer.hpp"
#include "pipeline/train/class_reinit.hpp"
#include "pipeline/train/host_train_engine.hpp"
#include "pipeline/train/train_state.hpp"
#include "tests/test_helpers.hpp"
#include "tests/test_model_synthetic.hpp"

using Catch::Matchers::Contains;
using namespace lab;
using namespace lab::train;

namespace {

Yolo26Model synthetic_n(int nc = 3) {
  return Yolo26Model::from_checkpoint(
      test::synthetic_checkpoint({.scale = "n", .nc = nc, .one2many_head = true}));
}

// One 64x64 image of uniform noise with two boxes.
TrainBatch noise_batch(uint64_t seed) {
  TrainBatch b;
  b.batch = 1, b.height = 64, b.width = 64;
  std::mt19937 rng{uint32_t(seed)};
  std::uniform_real_distribution<float> unit(0.0f, 1.0f);
  b.images.resize(3 * 64 * 64);
  for (float& v : b.images) v = unit(rng);
  b.ground_truth = {{{0, 4, 6, 40, 50}, {2, 30, 20, 60, 62}}};
  return b;
}

std::map<std::string, std::vector<float>> parameters_of(Yolo26Model model) {
  std::map<std::string, std::vector<float>> out;
  for_each_conv(model, [&](ConvSpec& conv) {
    for (const ParameterRef& p : conv_parameters(conv)) out[p.name] = *p.values;
  });
  return out;
}

}  // namespace

TEST_CASE("reference optimizer: one lr in every group is the plain step, a group's lr moves only it",
          "[train_engine]") {
  const Yolo26Model start = synthetic_n();
  const TrainBatch batch = noise_batch(3);
  reference::RefTensor input(1, 3, 64, 64);
  input.values = batch.images;
  const auto grads = reference::reference_gradients(start, input, batch.ground_truth, loss::LossConfig{});

  reference::OptimizerSettings settings{.name = "SGD", .lr = 0.01, .momentum = 0.937};
  Yolo26Model plain = start, grouped = start;
  reference::ReferenceOptimizer(settings).step(plain, grads.parameters);
  reference::GroupHyper hyper{{0.01, 0.01, 0.01}, 0.937, 5e-4, 10};
  const double norm = reference::ReferenceOptimizer(settings).step(grouped, grads.parameters, hyper);
  CHECK(norm == Approx(grads.norm).epsilon(1e-12));
  CHECK(parameters_of(plain) == parameters_of(grouped));

  Yolo26Model biases_only = start;
  reference::ReferenceOptimizer(settings).step(biases_only, grads.parameters,
                                               {{0, 0, 0.01}, 0.937, 5e-4, 10});
  const auto before = parameters_of(start), after = parameters_of(biases_only);
  int moved = 0;
  for (const auto& [name, values] : after) {
    const int group = reference::parameter_group(name);
    if (group != 2) {
      CHECK(values == before.at(name));
    } else if (values != before.at(name)) {
      ++moved;
    }
  }
  CHECK(moved > 50);  // every bias with a gradient
  CHECK(reference::parameter_group("model.0.conv.weight") == 0);
  CHECK(reference::parameter_group("model.0.bn.weight") == 1);
  CHECK(reference::parameter_group("model.0.bn.bias") == 2);
  CHECK(reference::parameter_group("model.23.cv3.0.2.weight") == 0);
  CHECK(reference::parameter_group("model.23.cv3.0.2.bias") == 2);
}

TEST_CASE("host engine (reference): two accumulated batches step on the summed gradients", "[train_engine]") {
  const Yolo26Model start = synthetic_n();
  const TrainBatch a = noise_batch(1), b = noise_batch(2);
  HostTrainEngine engine(start, "reference", test::embedded_context(), "AdamW");
  CHECK_THAT(engine.describe(), Contains("float64 reference backward, AdamW"));
  const BatchLoss la = engine.accumulate(a, loss::LossConfig{});
  engine.accumulate(b, loss::LossConfig{});
  const auto norms = engine.gradient_norms();
  double squares = 0;
  for (const auto& [name, norm] : norms) squares += norm * norm;
  const StepHyper hyper{{0.001, 0.002, 0.003}, 0.9, 5e-4, 10};
  const double norm = engine.step(hyper);
  CHECK(std::sqrt(squares) == Approx(norm).epsilon(1e-9));
  CHECK(norms.front().first == "model.0");

  // The same by hand: the reference's gradients of each batch, summed, one AdamW step.
  auto gradients = [&](const TrainBatch& batch) {
    reference::RefTensor input(1, 3, 64, 64);
    input.values = batch.images;
    return reference::reference_gradients(start, input, batch.ground_truth, loss::LossConfig{});
  };
  const auto ga = gradients(a), gb = gradients(b);
  CHECK(la.total == Approx(ga.loss.total).epsilon(1e-12));
  std::vector<ParameterGradient> sum = ga.parameters;
  for (size_t i = 0; i < sum.size(); ++i)
    for (size_t j = 0; j < sum[i].values.size(); ++j) sum[i].values[j] += gb.parameters[i].values[j];
  Yolo26Model expected = start;
  reference::ReferenceOptimizer({.name = "AdamW"}).step(expected, sum, {hyper.lr, 0.9, 5e-4, 10});
  Yolo26Model trained;
  engine.read_parameters(trained);
  CHECK(parameters_of(trained) == parameters_of(expected));
  CHECK_THROWS_AS(engine.step(hyper), RuntimeError);  // nothing accumulated since
}

namespace {

// The running statistics of a batch-statistics model's BatchNorms, by conv name.
std::map<std::string, std::vector<float>> running_statistics_of(const Yolo26Model& model) {
  std::map<std::string, std::vector<float>> out;
  for_each_conv(model, [&](const ConvSpec& conv) {
    if (conv.bn) out[conv.name + ".mean"] = conv.bn->mean, out[conv.name + ".var"] = conv.bn->var;
  });
  return out;
}

}  // namespace

TEST_CASE("host engine (reference) with batch-statistics BatchNorm: each forward moves the running statistics",
          "[train_engine][batchnorm_batch]") {
  Yolo26Model start = synthetic_n();
  set_batchnorm_mode(start, BatchNormMode::Batch);
  const TrainBatch a = noise_batch(1);
  HostTrainEngine engine(start, "reference", test::embedded_context(), "SGD");
  engine.accumulate(a, loss::LossConfig{});
  Yolo26Model after;
  engine.read_parameters(after);
  // The stem's batch statistics by hand from its conv output before the BatchNorm, then PyTorch's update
  // with momentum 0.03 and the unbiased variance.
  reference::RefTensor input(1, 3, 64, 64);
  input.values = a.images;
  const reference::NetworkTrace trace = reference::trace_network(start, input);
  const reference::RefTensor& u = trace.layers[0].conv.u;
  const FrozenBatchNorm &before = *start.layers[0].conv.bn, &moved = *after.layers[0].conv.bn;
  const double n = double(u.plane());
  for (int c = 0; c < u.channels; ++c) {
    double sum = 0, squares = 0;
    for (size_t i = 0; i < u.plane(); ++i) sum += u.channel(0, c)[i];
    const double mean = sum / n;
    for (size_t i = 0; i < u.plane(); ++i) squares += (u.channel(0, c)[i] - mean) * (u.channel(0, c)[i] - mean);
    const size_t k = size_t(c);
    CHECK(moved.mean[k] == Approx(0.97 * before.mean[k] + 0.03 * mean).epsilon(1e-6));
    CHECK(moved.var[k] == Approx(0.97 * before.var[k] + 0.03 * squares / (n - 1)).epsilon(1e-6));
  }
  // Every BatchNorm moved; the saved training state (what --resume reads) keeps them.
  const auto started = running_statistics_of(start), moved_all = running_statistics_of(after);
  size_t unchanged = 0;
  for (const auto& [name, values] : moved_all) unchanged += values == started.at(name);
  CHECK(unchanged == 0);
  const test::ScratchDir scratch("train_state_bn");
  save_train_state(scratch.path / "last_state.safetensors", RunPosition{}, after, after, engine.optimizer_state());
  CHECK(running_statistics_of(load_train_state(scratch.path / "last_state.safetensors", synthetic_n()).model) ==
        moved_all);
}

TEST_CASE("host engine: optimizer state round trip and refusals", "[train_engine]") {
  const Yolo26Model start = synthetic_n();
  HostTrainEngine engine(start, "reference", test::embedded_context(), "SGD");
  engine.accumulate(noise_batch(4), loss::LossConfig{});
  engine.step({{0.01, 0.01, 0.01}, 0.9, 5e-4, 10});
  const OptimizerState state = engine.optimizer_state();
  CHECK(state.name == "SGD");
  CHECK(state.steps == 1);
  CHECK(state.tensors.count("model.0.conv.weight.momentum") == 1);
  CHECK(state.tensors.count("model.23.cv3.0.2.bias.momentum") == 1);

  HostTrainEngine other(start, "reference", test::embedded_context(), "SGD");
  other.load_optimizer_state(state);
  CHECK(other.optimizer_state().tensors == state.tensors);

  HostTrainEngine adamw(start, "reference", test::embedded_context(), "AdamW");
  CHECK_THROWS_WITH(adamw.load_optimizer_state(state),
                    Contains("optimizer state of SGD cannot resume AdamW"));
  OptimizerState short_tensor = state;
  short_tensor.tensors["model.0.conv.weight.momentum"].pop_back();
  CHECK_THROWS_WITH(other.load_optimizer_state(short_tensor), Contains("model.0.conv.weight.momentum has"));
  OptimizerState stray = state;
  stray.tensors["model.99.conv.weight.momentum"] = {1.0f};
  CHECK_THROWS_WITH(other.load_optimizer_state(stray), Contains("1 tensors name no parameter"));
  CHECK_THROWS_WITH(HostTrainEngine(start, "tpu", test::embedded_context(), "SGD"),
                    Contains("--backend tpu"));
}

TEST_CASE("host engine: MuSGD takes Muon's update on weights, SGD's on the rest", "[train_engine]") {
  const Yolo26Model start = synthetic_n();
  const TrainBatch batch = noise_batch(6);
  HostTrainEngine engine(start, "reference", test::embedded_context(), "MuSGD");
  engine.accumulate(batch, loss::LossConfig{});
  const StepHyper hyper{{0.01, 0.02, 0.03}, 0.9, 5e-4, 10};
  const double norm = engine.step(hyper);
  const OptimizerState state = engine.optimizer_state();
  CHECK(state.tensors.count("model.2.cv1.conv.weight.muon_momentum") == 1);
  CHECK(state.tensors.count("model.2.cv1.bn.bias.muon_momentum") == 0);

  // One weight and one bias by hand: kernels/optim's MuSGD reference step on the clipped gradient.
  reference::RefTensor input(1, 3, 64, 64);
  input.values = batch.images;
  const auto g = reference::reference_gradients(start, input, batch.ground_truth, loss::LossConfig{});
  const double clip = std::min(1.0, 10 / (norm + 1e-6));
  const auto before = parameters_of(start);
  Yolo26Model trained;
  engine.read_parameters(trained);
  const auto after = parameters_of(trained);
  int checked = 0;
  for (const ParameterGradient& p : g.parameters) {
    if (p.name != "model.2.cv1.conv.weight" && p.name != "model.2.cv1.bn.bias") continue;
    ++checked;
    std::vector<double> param(before.at(p.name).begin(), before.at(p.name).end()), grad = p.values, buf,
                                                                                   muon_buf;
    for (double& v : grad) v *= clip;
    const bool weight = p.name == "model.2.cv1.conv.weight";
    const int rows = weight ? int(p.shape[0]) : 0, cols = weight ? int(param.size() / p.shape[0]) : 0;
    musgd_reference_step(param, buf, muon_buf, grad, rows, cols, 1.0, weight ? 0.01 : 0.03, 0.9,
                         weight ? 5e-4 : 0.0, 0.5, 0.5);
    const std::vector<float>& got = after.at(p.name);
    for (size_t i = 0; i < param.size(); ++i) CHECK(got[i] == float(param[i]));
  }
  CHECK(checked == 2);
}

TEST_CASE("training state: saved and read back exactly", "[train_engine]") {
  const test::ScratchDir scratch("train_state");
  Yolo26Model model = synthetic_n(), ema = synthetic_n();
  for_each_conv(ema, [](ConvSpec& conv) {
    for (const ParameterRef& p : conv_parameters(conv)) (*p.values)[0] += 0.25f;
  });
  RunPosition position;
  position.epoch = 3, position.next_batch = 7, position.loss_sums = {1.0 / 3, 2.5, 0.1};
  position.last_opt_step = 41, position.best_fitness = 0.123456789012345, position.best_epoch = 2;
  position.ema_updates = 11, position.seconds = 12.5, position.results_csv = "epoch,time\n1,2\n";
  const OptimizerState optimizer{"AdamW", 11, {{"model.0.conv.weight.exp_avg", {1, 2, 3}}}};
  const auto path = scratch.path / "last_state.safetensors";
  save_train_state(path, position, model, ema, optimizer);
  const TrainState back = load_train_state(path, synthetic_n());
  CHECK(back.position.epoch == 3);
  CHECK(back.position.next_batch == 7);
  CHECK(back.position.loss_sums == position.loss_sums);
  CHECK(back.position.best_fitness == position.best_fitness);
  CHECK(back.position.results_csv == position.results_csv);
  CHECK(back.position.last_opt_step == 41);
  CHECK(back.optimizer.name == "AdamW");
  CHECK(back.optimizer.steps == 11);
  CHECK(back.optimizer.tensors == optimizer.tensors);
  CHECK(parameters_of(back.model) == parameters_of(model));
  CHECK(parameters_of(back.ema) == parameters_of(ema));
  CHECK_THROWS_WITH(load_train_state(path, synthetic_n(5)), Contains("last_state.safetensors"));
}

TEST_CASE("class re-initialisation: nc outputs in both class branches, Detect's class prior",
          "[train_engine]") {
  Yolo26Model model = synthetic_n(3);
  const std::vector<std::string> names = {"a", "b", "c", "d", "e"};
  CHECK(needs_class_reinit(model, names));
  adopt_classes(model, names, 7);
  CHECK(model.nc == 5);
  CHECK(model.class_names == names);
  const DetectSpec& detect = model.layers.back().detect;
  CHECK(detect.nc == 5);
  CHECK(model.layers.back().out_channels == 9);
  for (const auto* levels : {&detect.levels, &detect.one2many}) {
    REQUIRE(levels->size() == 3);
    for (const DetectLevelSpec& level : *levels) {
      const ConvSpec& conv = level.cls.back();
      CHECK(conv.c_out == 5);
      CHECK(conv.weight.size() == size_t(5 * conv.c_in));
      // log(5 / nc / (640 / stride)^2): stride 8 -> log(1 / 6400)
      const double prior = std::log(5.0 / 5.0 / ((640.0 / level.stride) * (640.0 / level.stride)));
      for (float b : conv.bias) CHECK(b == Approx(prior));
      const double bound = 1.0 / std::sqrt(double(conv.c_in));
      double low = 0, high = 0;
      for (float w : conv.weight) low = std::min(low, double(w)), high = std::max(high, double(w));
      CHECK(low >= -bound);
      CHECK(high <= bound);
      CHECK(high - low > bound);  // spread over the range, not a constant
    }
  }
  CHECK(detect.levels[0].stride == 8);
  Yolo26Model again = synthetic_n(3);
  adopt_classes(again, names, 7);
  CHECK(again.layers.back().detect.levels[2].cls.back().weight == detect.levels[2].cls.back().weight);

  // The rebuilt model trains: the reference backward gives gradients of the new shapes.
  TrainBatch batch = noise_batch(5);
  batch.ground_truth[0][1].cls = 4;
  reference::RefTensor input(1, 3, 64, 64);
  input.values = batch.images;
  const auto g = reference::reference_gradients(model, input, batch.ground_truth, loss::LossConfig{});
  for (const ParameterGradient& p : g.parameters)
    if (p.name == "model.23.one2one_cv3.1.2.weight")
      CHECK(p.values.size() == size_t(5 * detect.levels[1].cls.back().c_in));
  CHECK(g.loss.one2many.positives > 0);

  Yolo26Model same = synthetic_n(3);
  const auto before = parameters_of(same);
  adopt_classes(same, {"x", "y", "z"}, 7);
  CHECK(parameters_of(same) == before);  // the same count: only the names change
  CHECK(same.class_names[2] == "z");
}
