// DeviceTrainEngine (pipeline/train/device_train_engine) on a synthetic yolo26n (3 classes, both heads) at
// 64x64: its loss and every checkpoint parameter's gradient against the float64 reference backward, the
// gradients accumulated over two batches; three AdamW and three SGD steps with per-group learning rates
// against kernels/optim's float64 reference steps on the engine's own gradients, then the forward on the
// stepped parameters against a pass built from them on the host; the optimizer state's save/load round
// trip; no device allocation and no weight upload after the first iteration. With batch-statistics BatchNorm
// ([batchnorm_batch]): the gradients against the kernel backward's, and the steps, norms, parameters and
// running statistics against HostTrainEngine's. cpu emulator; [gpu] twins.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>

#include "kernels/compare.hpp"
#include "kernels/optim/optim_reference.hpp"
#include "pipeline/executor/kernel_backward.hpp"
#include "pipeline/model/batchnorm_batch.hpp"
#include "pipeline/model/model_convs.hpp"
#include "pipeline/reference/reference_backward.hpp"
#include "pipeline/train/device_train_engine.hpp"
#include "pipeline/train/host_train_engine.hpp"
#include "tests/counting_backend.hpp"
#include "tests/delayed_lanes_backend.hpp"
#include "tests/network_test_support.hpp"
#include "tests/test_helpers.hpp"
#include "tests/test_model_synthetic.hpp"

using namespace lab;
using train::DeviceTrainEngine;

namespace {

constexpr int kSize = 64;

train::TrainBatch make_batch(int batch, uint64_t seed) {
  train::TrainBatch b;
  b.batch = batch, b.height = kSize, b.width = kSize;
  b.images = random_uniform(size_t(batch) * 3 * kSize * kSize, 0.0f, 1.0f, seed);
  const std::vector<std::vector<loss::GtBox>> labels = {{{0, 4, 6, 40, 50}, {2, 30, 10, 60, 40}},
                                                        {{1, 20, 24, 58, 62}}};
  b.ground_truth.assign(labels.begin(), labels.begin() + batch);
  return b;
}

// The synthetic yolo26n, its BatchNorm frozen or normalising with the batch's statistics.
Yolo26Model trainable_model(BatchNormMode bn) {
  Yolo26Model model = test::synthetic_trainable_yolo26n();
  set_batchnorm_mode(model, bn);
  return model;
}

// Every BatchNorm's running mean and variance of `model`, in for_each_conv order.
std::vector<std::vector<float>> running_statistics(Yolo26Model model) {
  std::vector<std::vector<float>> out;
  for_each_conv(model, [&](const ConvSpec& conv) {
    if (!conv.bn) return;
    out.push_back(conv.bn->mean);
    out.push_back(conv.bn->var);
  });
  return out;
}

// Those of an engine, read into a copy of `model`.
std::vector<std::vector<float>> running_statistics(const train::TrainEngine& engine,
                                                   const Yolo26Model& model) {
  Yolo26Model copy = model;
  engine.read_parameters(copy);
  return running_statistics(copy);
}

// The checkpoint parameters of `model` in for_each_conv order, as float64.
std::vector<std::vector<double>> parameters_of(Yolo26Model model) {
  std::vector<std::vector<double>> out;
  for_each_conv(model, [&](ConvSpec& conv) {
    for (const ParameterRef& ref : conv_parameters(conv))
      out.emplace_back(ref.values->begin(), ref.values->end());
  });
  return out;
}

// The parameters an engine holds, read into a copy of `model`.
std::vector<std::vector<double>> engine_parameters(const train::TrainEngine& engine,
                                                   const Yolo26Model& model) {
  Yolo26Model copy = model;
  engine.read_parameters(copy);
  return parameters_of(copy);
}

// Weights more than 2e-6 + 1e-6 |want| apart: the optimizer runners' bar for float32 updates against float64
// ones over a few steps (kernels/optim/optim_runners.cpp).
size_t weights_apart(const std::vector<std::vector<double>>& got,
                     const std::vector<std::vector<double>>& want) {
  size_t bad = 0;
  for (size_t i = 0; i < want.size(); ++i)
    for (size_t j = 0; j < want[i].size(); ++j)
      bad += std::fabs(got[i][j] - want[i][j]) > 2e-6 + 1e-6 * std::fabs(want[i][j]);
  return bad;
}

// 1e-4 relative L2 per tensor, the kernel backward's own bar against the reference (test_kernel_backward:
// float32 kernels against float64 through ~100 layers forward and back, measured ~1e-5); the engine adds the
// chain rule in float64 rounded once (2^-24) and, after a second batch, one float32 addition per element.
void check_gradients(Backend& backend, const std::string& what) {
  const Yolo26Model model = test::synthetic_trainable_yolo26n();
  const train::TrainBatch batch = make_batch(2, 31);
  DeviceTrainEngine engine(backend, model, "AdamW", batch.batch, kSize, kSize);
  const train::BatchLoss loss = engine.accumulate(batch, loss::LossConfig{});
  reference::RefTensor input(batch.batch, 3, kSize, kSize);
  input.values = batch.images;
  const reference::NetworkGradients want =
      reference::reference_gradients(model, input, batch.ground_truth, loss::LossConfig{});
  CHECK(loss.total == Approx(want.loss.total).epsilon(1e-4));
  CHECK(loss.one2many.positives == want.loss.one2many.positives);

  const std::vector<ParameterGradient> got = engine.gradients();
  REQUIRE(got.size() == want.parameters.size());
  double worst = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    REQUIRE(got[i].name == want.parameters[i].name);
    REQUIRE(got[i].shape == want.parameters[i].shape);
    const double rel = test::relative_l2(got[i].values, want.parameters[i].values);
    INFO(what << ": " << got[i].name << " relative L2 " << rel);
    CHECK(rel <= 1e-4);
    worst = std::max(worst, rel);
  }
  // Per conv: the norm over its parameters, from the reference's gradients.
  const std::vector<std::pair<std::string, double>> norms = engine.gradient_norms();
  size_t p = 0;
  for (const auto& [conv, norm] : norms) {
    double sum = 0;
    for (; p < want.parameters.size() && want.parameters[p].name.rfind(conv + ".", 0) == 0; ++p)
      for (double v : want.parameters[p].values) sum += v * v;
    INFO(what << ": gradient norm of " << conv);
    CHECK(norm == Approx(std::sqrt(sum)).epsilon(1e-4).margin(1e-12));
  }
  CHECK(p == want.parameters.size());

  // A second batch (the same one again) on the same pass: the gradients add up.
  engine.accumulate(batch, loss::LossConfig{});
  const std::vector<ParameterGradient> twice = engine.gradients();
  double worst_twice = 0;
  for (size_t i = 0; i < twice.size(); ++i) {
    std::vector<double> doubled = want.parameters[i].values;
    for (double& v : doubled) v *= 2;
    worst_twice = std::max(worst_twice, test::relative_l2(twice[i].values, doubled));
  }
  CHECK(worst_twice <= 1e-4);
  WARN(what << ": " << got.size() << " parameter gradients, worst relative L2 " << worst
            << ", after two batches " << worst_twice);
}

// Batch-statistics BatchNorm: the engine's checkpoint gradients are the kernel backward's (checked against
// the reference in test_kernel_backward) bit for bit, as no chain rule scales them: conv.weight from the
// conv's backward, bn.weight / bn.bias from the BatchNorm's, added once to zeroed gradients; the per-conv
// norms are theirs.
void check_batch_statistics_gradients(Backend& backend, const std::string& what) {
  const Yolo26Model model = trainable_model(BatchNormMode::Batch);
  const train::TrainBatch batch = make_batch(2, 31);
  DeviceTrainEngine engine(backend, model, "SGD", batch.batch, kSize, kSize);
  const train::BatchLoss loss = engine.accumulate(batch, loss::LossConfig{});
  const TrainingGradients want =
      kernel_gradients(backend, model, batch.images, batch.batch, kSize, kSize, batch.ground_truth, {});
  CHECK(loss.total == want.total);
  const std::vector<ParameterGradient> got = engine.gradients();
  REQUIRE(got.size() == want.parameters.size());
  size_t p = 0;
  for (const auto& [conv, norm] : engine.gradient_norms()) {
    double sum = 0;
    for (; p < got.size() && got[p].name.rfind(conv + ".", 0) == 0; ++p) {
      INFO(what << ": " << got[p].name);
      CHECK(got[p].name == want.parameters[p].name);
      CHECK(got[p].values == want.parameters[p].values);
      for (double v : want.parameters[p].values) sum += v * v;
    }
    INFO(what << ": gradient norm of " << conv);
    CHECK(norm == Approx(std::sqrt(sum)).epsilon(1e-12).margin(1e-12));
  }
  CHECK(p == got.size());
  // The same batch again: the forward normalises with the batch's own statistics (the running ones it moved
  // are not read), so the gradients are exactly twice (g + g rounds exactly).
  engine.accumulate(batch, loss::LossConfig{});
  const std::vector<ParameterGradient> twice = engine.gradients();
  for (size_t i = 0; i < twice.size(); ++i) {
    std::vector<double> doubled = want.parameters[i].values;
    for (double& v : doubled) v *= 2;
    INFO(what << ": " << twice[i].name << " after two batches");
    CHECK(twice[i].values == doubled);
  }
}

// Three steps of `optimizer` with per-group learning rates, each checked against kernels/optim's float64
// reference step (torch's formulas) applied to the engine's own accumulated gradients, clipped at a max norm
// the gradients exceed (weights_apart's bar). Then the engine's forward on
// the stepped parameters (folded on the device) against a pass built from them on the host.
void check_steps(Backend& backend, const std::string& optimizer, const std::string& what) {
  const Yolo26Model model = test::synthetic_trainable_yolo26n();
  const train::TrainBatch batch = make_batch(1, 41);
  DeviceTrainEngine engine(backend, model, optimizer, batch.batch, kSize, kSize);
  train::StepHyper hyper;
  hyper.lr = {0.002, 0.0015, 0.004};
  hyper.momentum = 0.9;
  hyper.weight_decay = 5e-4;
  hyper.max_norm = 1.0;
  const std::vector<std::vector<double>> initial = parameters_of(model);
  std::vector<std::vector<double>> param = initial, state0(param.size()), state1(param.size());
  std::vector<double> losses;
  for (int step = 1; step <= 3; ++step) {
    losses.push_back(engine.accumulate(batch, loss::LossConfig{}).total);
    const std::vector<ParameterGradient> grads = engine.gradients();
    std::vector<std::vector<double>> g;
    for (const ParameterGradient& p : grads) g.push_back(p.values);
    const double norm = total_grad_norm_reference(g), scale = clip_scale_reference(norm, hyper.max_norm);
    for (size_t i = 0; i < g.size(); ++i) {
      for (double& v : g[i]) v *= scale;
      const int group = grads[i].name.size() > 5 && grads[i].name.substr(grads[i].name.size() - 5) == ".bias"
                            ? 2
                        : grads[i].name.find(".bn.") != std::string::npos ? 1
                                                                          : 0;
      const double lr = hyper.lr[size_t(group)], wd = group == 0 ? hyper.weight_decay : 0.0;
      if (optimizer == "SGD")
        sgd_nesterov_reference_step(param[i], state0[i], g[i], lr, hyper.momentum, wd, step);
      else
        adamw_reference_step(param[i], state0[i], state1[i], g[i], lr, hyper.momentum, 0.999, 1e-8, wd, step);
    }
    CHECK(engine.step(hyper) == Approx(norm).epsilon(1e-5));
    Yolo26Model stepped = model;
    engine.read_parameters(stepped);
    INFO(what << ": step " << step);
    CHECK(weights_apart(parameters_of(stepped), param) == 0);
    if (step == 3) {
      CHECK(parameters_of(stepped) != initial);
      const double after = engine.accumulate(batch, loss::LossConfig{}).total;
      const TrainingGradients host = kernel_gradients(backend, stepped, batch.images, batch.batch, kSize,
                                                      kSize, batch.ground_truth, loss::LossConfig{});
      // The same float32 weights but where NVRTC contracts the device fold's bias into an FMA (one ulp).
      CHECK(after == Approx(host.total).epsilon(1e-5));
      WARN(what << ": " << optimizer << " losses " << losses[0] << ", " << losses[1] << ", " << losses[2]
                << ", " << after);
    }
  }
}

// Save after two steps, load into an engine made from the saved parameters, one more step on both: the same
// parameters, bit for bit.
void check_state_round_trip(Backend& backend, const std::string& optimizer) {
  const Yolo26Model model = test::synthetic_trainable_yolo26n();
  const train::TrainBatch batch = make_batch(1, 51);
  train::StepHyper hyper;
  hyper.lr = {0.01, 0.01, 0.02};
  DeviceTrainEngine a(backend, model, optimizer, 1, kSize, kSize);
  for (int i = 0; i < 2; ++i) {
    a.accumulate(batch, loss::LossConfig{});
    a.step(hyper);
  }
  const train::OptimizerState state = a.optimizer_state();
  CHECK(state.steps == 2);
  Yolo26Model saved = model;
  a.read_parameters(saved);
  DeviceTrainEngine b(backend, saved, optimizer, 1, kSize, kSize);
  b.load_optimizer_state(state);
  for (DeviceTrainEngine* e : {&a, &b}) {
    e->accumulate(batch, loss::LossConfig{});
    e->step(hyper);
  }
  CHECK(engine_parameters(a, model) == engine_parameters(b, model));
  CHECK(a.optimizer_state().tensors == b.optimizer_state().tensors);
}

// A counting backend that takes graph captures where its inner one only replays the recorded work again
// (the cpu emulator): the tape's graph path (capture once, replay) runs on cpu too.
class CapturingBackend : public test::CountingBackend {
 public:
  using CountingBackend::CountingBackend;
  bool can_capture_graphs() const override { return true; }
};

// After the first iteration no device allocation at all, and no upload but the batch's own (the images and
// the labels: independent of the network's ~100 convs); from the second on, the forward and the backward are
// one graph each, captured once, and the iterations' losses are those of an engine launching directly.
void check_no_allocations(Backend& inner, bool force_graphs) {
  std::unique_ptr<test::CountingBackend> counting = force_graphs
                                                        ? std::make_unique<CapturingBackend>(inner)
                                                        : std::make_unique<test::CountingBackend>(inner);
  test::CountingBackend& backend = *counting;
  const train::TrainBatch batch = make_batch(2, 61);
  DeviceTrainEngine engine(backend, test::synthetic_trainable_yolo26n(), "AdamW", batch.batch, kSize, kSize);
  train::StepHyper hyper;
  hyper.lr = {0.001, 0.001, 0.001};
  std::vector<double> losses;
  const auto iteration = [&] {
    losses.push_back(engine.accumulate(batch, loss::LossConfig{}).total);
    engine.step(hyper);
  };
  iteration();
  const size_t allocations = backend.allocations, uploads = backend.uploads;
  CHECK(backend.captures == 0);
  iteration();
  const size_t uploads_per_iteration = backend.uploads - uploads;
  iteration();
  CHECK(backend.allocations == allocations);
  CHECK(backend.uploads - uploads == 2 * uploads_per_iteration);
  CHECK(uploads_per_iteration <= 3);  // the images, the labels' rows and their counts
  CHECK(backend.captures == (backend.can_capture_graphs() ? 2u : 0u));
  CHECK(engine.describe().find("without graphs") == std::string::npos);
  if (force_graphs) {  // the replayed graphs compute what direct launches compute
    DeviceTrainEngine direct(inner, test::synthetic_trainable_yolo26n(), "AdamW", batch.batch, kSize, kSize);
    for (double loss : losses) {
      CHECK(direct.accumulate(batch, loss::LossConfig{}).total == loss);
      direct.step(hyper);
    }
  }
  WARN("allocations: " << allocations << " in the first iteration, none after; uploads per iteration "
                       << uploads_per_iteration << "; graph captures " << backend.captures);
}

// DeviceTrainEngine and HostTrainEngine (the same kernel backward; the chain rule, accumulation and
// optimizer on the host in float64) on the cpu backend: the same losses, norms and parameters (weights_apart:
// the float32 optimizer against float64 on the same gradients) after one AdamW step or two SGD / MuSGD steps,
// and the device engine's saved state continues on the host engine as on itself. AdamW stops at one step:
// its early updates are about lr * sign(g), so the second step's gradients, from parameters a float32
// rounding apart, flip the update of the few weights whose gradient is that rounding's size (19 of 2.5 M
// here).
// With batch-statistics BatchNorm both engines' forwards move the running statistics alike (the same
// kernels): equal, and moved from the checkpoint's. It stops at one step too: its gradients here (batch 1,
// four values a channel at stride 32) are so ill-conditioned that the second step's, from parameters a float32
// rounding apart, differ by ~6 % (measured; a one-ulp nudge of a batch-1 input moves the reference's own
// gradients by ~1e-3, against 2e-8 with frozen BatchNorm).
// The host engine runs its kernel backward on the device engine's backend, so both run the same kernels: the
// H200 run of 2026-12-02 put the device engine on cuda beside a host engine on the cpu emulator, and at batch
// statistics their running statistics and per-conv norms parted in the last bits at step 1 and the step after
// the resume by 50 % (the ill-conditioning above amplifies the two backends' rounding differences).
void check_against_host_engine(Backend& backend, const std::string& optimizer,
                               BatchNormMode bn = BatchNormMode::Frozen) {
  const Yolo26Model model = trainable_model(bn);
  const train::TrainBatch batch = make_batch(1, 71);
  train::StepHyper hyper;
  hyper.lr = {0.002, 0.0015, 0.004};
  hyper.momentum = 0.9;
  hyper.max_norm = 1.0;
  DeviceTrainEngine device(backend, model, optimizer, 1, kSize, kSize);
  train::HostTrainEngine host(model, backend.name(), test::embedded_context(), optimizer);
  const int steps = optimizer == "AdamW" || bn == BatchNormMode::Batch ? 1 : 2;
  for (int step = 1; step <= steps; ++step) {
    INFO(optimizer << " step " << step);
    CHECK(device.accumulate(batch, loss::LossConfig{}).total ==
          Approx(host.accumulate(batch, loss::LossConfig{}).total).epsilon(1e-5));
    const auto device_norms = device.gradient_norms(), host_norms = host.gradient_norms();
    REQUIRE(device_norms.size() == host_norms.size());
    for (size_t i = 0; i < host_norms.size(); ++i) {
      CHECK(device_norms[i].first == host_norms[i].first);
      CHECK(device_norms[i].second == Approx(host_norms[i].second).epsilon(1e-5).margin(1e-12));
    }
    CHECK(device.step(hyper) == Approx(host.step(hyper)).epsilon(1e-5));
    CHECK(weights_apart(engine_parameters(device, model), engine_parameters(host, model)) == 0);
    CHECK(running_statistics(device, model) == running_statistics(host, model));
  }
  CHECK((running_statistics(device, model) != running_statistics(model)) == (bn == BatchNormMode::Batch));
  // The device engine's state, loaded into a host engine on its parameters: the next step as the device's.
  Yolo26Model saved = model;
  device.read_parameters(saved);
  train::HostTrainEngine resumed(saved, backend.name(), test::embedded_context(), optimizer);
  resumed.load_optimizer_state(device.optimizer_state());
  device.accumulate(batch, loss::LossConfig{});
  resumed.accumulate(batch, loss::LossConfig{});
  CHECK(device.step(hyper) == Approx(resumed.step(hyper)).epsilon(1e-5));
  CHECK(weights_apart(engine_parameters(device, model), engine_parameters(resumed, model)) == 0);
}

// A batch given as bytes (what the loader hands over: uploaded as bytes, converted on the device) trains
// exactly as the same batch given as its float planes: the same loss and gradients bit for bit; a batch with
// neither or both, or of the wrong size, is a one-line error. A batch staged (stage(): copied on the copy
// lane beside the previous iteration) trains as it does unstaged, through a backend that runs that copy only
// when its lane joins (the latest a stream may): the accumulate() that takes it waits for the copy.
void check_pixel_batch(Backend& backend) {
  const Yolo26Model model = trainable_model(BatchNormMode::Frozen);
  train::TrainBatch bytes = make_batch(2, 31);
  bytes.images.clear();
  const std::vector<uint8_t> pixels = random_bytes(size_t(2) * 3 * kSize * kSize, 32);
  bytes.pixels.assign(pixels.begin(), pixels.end());
  train::TrainBatch floats = bytes;
  floats.pixels.clear();
  floats.images = bytes.planes();
  DeviceTrainEngine from_bytes(backend, model, "SGD", 2, kSize, kSize);
  DeviceTrainEngine from_floats(backend, model, "SGD", 2, kSize, kSize);
  CHECK(from_bytes.accumulate(bytes, {}).total == from_floats.accumulate(floats, {}).total);
  const std::vector<ParameterGradient> a = from_bytes.gradients(), b = from_floats.gradients();
  REQUIRE(a.size() == b.size());
  for (size_t i = 0; i < a.size(); ++i) CHECK(a[i].values == b[i].values);

  train::TrainBatch second = bytes;
  const std::vector<uint8_t> second_pixels = random_bytes(bytes.pixels.size(), 33);
  second.pixels.assign(second_pixels.begin(), second_pixels.end());
  test::DelayedLanesBackend delayed(backend);
  DeviceTrainEngine staging(delayed, model, "SGD", 2, kSize, kSize);
  staging.accumulate(bytes, {});
  staging.stage(second);
  const double staged_loss = staging.accumulate(second, {}).total;
  CHECK(delayed.side_lane_uploads == 1);
  CHECK(staged_loss == from_bytes.accumulate(second, {}).total);  // gradients of both batches, as staging's
  const std::vector<ParameterGradient> s = staging.gradients(), u = from_bytes.gradients();
  REQUIRE(s.size() == u.size());
  for (size_t i = 0; i < s.size(); ++i) CHECK(s[i].values == u[i].values);

  train::TrainBatch both = bytes;
  both.images = floats.images;
  CHECK_THROWS_WITH(from_bytes.accumulate(both, {}), "train batch: both bytes and float images are set");
  bytes.pixels.pop_back();
  CHECK_THROWS_WITH(from_bytes.accumulate(bytes, {}),
                    "train batch: " + std::to_string(bytes.pixels.size()) + " image values for 2 images of 64x64");
}

}  // namespace

TEST_CASE("DeviceTrainEngine: a batch of bytes trains exactly as its float planes on cpu", "[device_train]") {
  auto backend = make_backend("cpu", test::embedded_context());
  check_pixel_batch(*backend);
}

TEST_CASE("DeviceTrainEngine: loss and gradients match the float64 reference on cpu", "[device_train]") {
  auto backend = make_backend("cpu", test::embedded_context());
  check_gradients(*backend, "cpu");
}

TEST_CASE("DeviceTrainEngine: 3 AdamW and 3 SGD steps match the float64 optimizer on cpu", "[device_train]") {
  auto backend = make_backend("cpu", test::embedded_context());
  check_steps(*backend, "AdamW", "cpu");
  check_steps(*backend, "SGD", "cpu");
}

TEST_CASE("DeviceTrainEngine: the optimizer state's round trip continues identically on cpu",
          "[device_train]") {
  auto backend = make_backend("cpu", test::embedded_context());
  check_state_round_trip(*backend, "AdamW");
  check_state_round_trip(*backend, "SGD");
}

TEST_CASE("DeviceTrainEngine: bad optimizer names and states are one-line errors", "[device_train]") {
  auto backend = make_backend("cpu", test::embedded_context());
  const Yolo26Model model = test::synthetic_trainable_yolo26n();
  CHECK_THROWS_WITH(DeviceTrainEngine(*backend, model, "Adam", 1, kSize, kSize),
                    "optimizer 'Adam': the device engine runs SGD, AdamW or MuSGD");
  DeviceTrainEngine engine(*backend, model, "sgd", 1, kSize, kSize);
  train::OptimizerState state = engine.optimizer_state();
  state.name = "AdamW";
  CHECK_THROWS_WITH(engine.load_optimizer_state(state),
                    "optimizer state of AdamW, but this run's optimizer is SGD");
  state = engine.optimizer_state();
  state.steps = 1;
  const std::string first = state.tensors.begin()->first;
  state.tensors.erase(state.tensors.begin());
  CHECK_THROWS_WITH(engine.load_optimizer_state(state), "optimizer state: no " + first + " after 1 steps");
  state = engine.optimizer_state();
  state.tensors[first].pop_back();
  CHECK_THROWS_WITH(engine.load_optimizer_state(state),
                    Catch::Matchers::StartsWith("optimizer state: " + first + " has "));
  state = engine.optimizer_state();
  state.tensors["model.99.cv1.conv.weight.momentum"] = {1.0f};
  CHECK_THROWS_WITH(engine.load_optimizer_state(state),
                    "optimizer state: 1 tensors name no parameter of the model");
}

TEST_CASE("DeviceTrainEngine agrees with HostTrainEngine on cpu, and its state resumes there",
          "[device_train]") {
  auto backend = make_backend("cpu", test::embedded_context());
  check_against_host_engine(*backend, "AdamW");
  check_against_host_engine(*backend, "SGD");
  check_against_host_engine(*backend, "MuSGD");
}

TEST_CASE(
    "DeviceTrainEngine with batch-statistics BatchNorm on cpu: gradients as the kernel backward's, steps and "
    "running statistics as HostTrainEngine's",
    "[device_train][batchnorm_batch]") {
  auto backend = make_backend("cpu", test::embedded_context());
  check_batch_statistics_gradients(*backend, "cpu");
  check_against_host_engine(*backend, "SGD", BatchNormMode::Batch);
}

TEST_CASE("DeviceTrainEngine: no allocation after the first iteration on cpu", "[device_train]") {
  auto backend = make_backend("cpu", test::embedded_context());
  check_no_allocations(*backend, true);
}

TEST_CASE("DeviceTrainEngine: gradients, steps, state and allocations on cuda", "[device_train][gpu]") {
  LAB_REQUIRE_GPU_OR_SKIP();
  auto backend = make_backend("cuda", test::embedded_context());
  check_pixel_batch(*backend);
  check_gradients(*backend, "cuda");
  check_steps(*backend, "AdamW", "cuda");
  check_steps(*backend, "SGD", "cuda");
  check_state_round_trip(*backend, "AdamW");
  check_no_allocations(*backend, false);
}

TEST_CASE("DeviceTrainEngine with batch-statistics BatchNorm on cuda",
          "[device_train][batchnorm_batch][gpu]") {
  LAB_REQUIRE_GPU_OR_SKIP();
  auto backend = make_backend("cuda", test::embedded_context());
  check_batch_statistics_gradients(*backend, "cuda");
  check_against_host_engine(*backend, "SGD", BatchNormMode::Batch);
}
