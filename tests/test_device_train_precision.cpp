// DeviceTrainEngine at fp16 and bf16 (16-bit conv products, float32 master weights, gradients and optimizer)
// against the same engine at fp32 on a synthetic yolo26n (3 classes, both heads) at 64x64: the convs take the
// precision policy's variants, the loss and the gradients stay within the bars written below, and after an
// AdamW step the 16-bit forward the device fold feeds equals a pass built from the stepped parameters on the
// host. fp16's loss scaling: the gradients come back unscaled (the comparison with fp32 above would miss by
// 2^16 otherwise), the clip and the SGD step run on them (against kernels/optim's float64 reference), an
// overflow (a scale of 2^120) skips the step and halves the scale, 2000 finite steps double it, and the state
// round trip continues bit for bit. cpu emulator; [gpu] twins.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>

#include "kernels/compare.hpp"
#include "kernels/optim/optim_reference.hpp"
#include "pipeline/executor/kernel_backward.hpp"
#include "pipeline/model/model_convs.hpp"
#include "pipeline/train/device_train_engine.hpp"
#include "tests/network_test_support.hpp"
#include "tests/test_helpers.hpp"
#include "tests/test_model_synthetic.hpp"

using namespace lab;
using train::DeviceTrainEngine;

namespace {

constexpr int kSize = 64;

train::TrainBatch two_images() {
  train::TrainBatch b;
  b.batch = 2, b.height = kSize, b.width = kSize;
  b.images = random_uniform(size_t(2) * 3 * kSize * kSize, 0.0f, 1.0f, 83);
  b.ground_truth = {{{0, 4, 6, 40, 50}, {2, 30, 10, 60, 40}}, {{1, 20, 24, 58, 62}}};
  return b;
}

std::vector<double> all_values(const std::vector<ParameterGradient>& grads) {
  std::vector<double> out;
  for (const ParameterGradient& g : grads) out.insert(out.end(), g.values.begin(), g.values.end());
  return out;
}

struct Bars {
  double loss;      // relative difference of the total loss
  double gradient;  // relative L2 of all the gradients together
};

// The bars, in units of a 16-bit operand's relative rounding u = 2^-11 (fp16) or 2^-8 (bf16): the loss within
// u (a sum over every anchor: the roundings average out; measured 0.01 u fp16, 0.02 u bf16 on cpu), all the
// gradients together within relative L2 2u (each a sum of products over ~100 layers; measured 0.27 u fp16,
// 0.28 u bf16 on cpu). Gradients left scaled by fp16's 2^16 would miss by 2^16.
Bars bars_of(Precision p) {
  const double u = p == Precision::Fp16 ? std::ldexp(1.0, -11) : std::ldexp(1.0, -8);
  return {u, 2 * u};
}

void check_precision(Backend& backend, Precision precision, const std::string& what) {
  const Yolo26Model model = test::synthetic_trainable_yolo26n();
  const train::TrainBatch batch = two_images();
  DeviceTrainEngine fp32(backend, model, "AdamW", batch.batch, kSize, kSize);
  DeviceTrainEngine half(backend, model, "AdamW", batch.batch, kSize, kSize, precision);
  CHECK(half.describe().find(precision_name(precision) + " products, float32 master weights") !=
        std::string::npos);
  const double want = fp32.accumulate(batch, loss::LossConfig{}).total;
  const double got = half.accumulate(batch, loss::LossConfig{}).total;
  const Bars bars = bars_of(precision);
  const double loss_error = std::fabs(got - want) / std::fabs(want);
  const double grad_error = test::relative_l2(all_values(half.gradients()), all_values(fp32.gradients()));
  INFO(what << " " << precision_name(precision));
  CHECK(loss_error <= bars.loss);
  CHECK(grad_error <= bars.gradient);
  CHECK(grad_error > 0);  // the 16-bit products did run

  train::StepHyper hyper;
  hyper.lr = {0.002, 0.0015, 0.004};
  half.step(hyper);
  Yolo26Model stepped = model;
  half.read_parameters(stepped);
  const double after = half.accumulate(batch, loss::LossConfig{}).total;
  TrainingPass host(backend, stepped, batch.batch, kSize, kSize, precision);
  // The same 16-bit operands (the device fold rounds w' as the host's upload does); NVRTC may contract the
  // device fold's bias into an FMA (one float32 ulp).
  CHECK(after == Approx(host.run(batch.images, batch.ground_truth, loss::LossConfig{}).total).epsilon(1e-5));
  WARN(what << " " << precision_name(precision) << ": loss " << got << " (fp32 " << want << ", rel "
            << loss_error << "), gradients rel L2 " << grad_error << "; after a step " << after);
}

// The stem (layer 0) at the policy's precision for its role, every dense body conv on 16-bit tensor cores,
// and the attention core on them too.
void check_variants(Backend& backend) {
  const Yolo26Model model = test::synthetic_trainable_yolo26n();
  for (Precision p : {Precision::Fp16, Precision::Bf16}) {
    const TrainingPass pass(backend, model, 1, kSize, kSize, p);
    const auto& convs = pass.tape().convs();
    const HalfType half = p == Precision::Fp16 ? HalfType::f16 : HalfType::bf16;
    INFO(precision_name(p));
    // The stem (3 input channels) on v5_fp16 at fp16, float32 v2_tiled at bf16.
    CHECK(convs.front()->forward->variant() ==
          (p == Precision::Fp16 ? ConvVariant::Fp16 : ConvVariant::Tiled));
    size_t on_half = 0, on_patch = 0, dense = 0, dense_3x3_s1 = 0;
    for (const auto& c : convs) {
      dense += c->spec->groups == 1;
      dense_3x3_s1 +=
          c->spec->groups == 1 && c->spec->kernel == 3 && c->spec->c_in % 8 == 0 && c->spec->stride == 1;
      on_half += conv_variant_half_type(c->forward->variant()) == half;
      on_patch += c->forward->variant() == ConvVariant::Fp16Patch;
    }
    CHECK(on_half == dense - (p == Precision::Bf16 ? 1 : 0));
    CHECK(on_patch == (p == Precision::Fp16 ? dense_3x3_s1 : 0));  // fp16's dense 3x3 stride-1 convs
    // The attention core's Flash Attention passes in the same 16-bit type (KEY_DIM 32).
    REQUIRE(!pass.tape().attentions().empty());
    for (const auto& attention : pass.tape().attentions()) CHECK(attention->half_type() == half);
  }
}

std::vector<std::vector<double>> parameters_of(const train::TrainEngine& engine, Yolo26Model model) {
  engine.read_parameters(model);
  std::vector<std::vector<double>> out;
  for_each_conv(model, [&](ConvSpec& conv) {
    for (const ParameterRef& ref : conv_parameters(conv))
      out.emplace_back(ref.values->begin(), ref.values->end());
  });
  return out;
}

// One SGD step (one learning rate, no weight decay: every group alike) against the float64 reference on the
// engine's unscaled gradients, clipped: the clip saw the unscaled norm. Weights within 2e-6 + 1e-6 |w| (the
// optimizer runners' bar for float32 updates against float64 ones).
void check_unscale_before_clip(Backend& backend) {
  const Yolo26Model model = test::synthetic_trainable_yolo26n();
  const train::TrainBatch batch = two_images();
  DeviceTrainEngine engine(backend, model, "SGD", batch.batch, kSize, kSize, Precision::Fp16);
  engine.accumulate(batch, loss::LossConfig{});
  std::vector<std::vector<double>> g;
  for (const ParameterGradient& p : engine.gradients()) g.push_back(p.values);
  train::StepHyper hyper;
  hyper.lr = {0.01, 0.01, 0.01};
  hyper.momentum = 0.9, hyper.weight_decay = 0, hyper.max_norm = 0.5;
  const double norm = total_grad_norm_reference(g), clip = clip_scale_reference(norm, hyper.max_norm);
  REQUIRE(clip < 1);  // the clip does act
  std::vector<std::vector<double>> want = parameters_of(engine, model);
  for (size_t i = 0; i < g.size(); ++i) {
    for (double& v : g[i]) v *= clip;
    std::vector<double> momentum(g[i].size(), 0.0);
    sgd_nesterov_reference_step(want[i], momentum, g[i], 0.01, 0.9, 0.0, 1);
  }
  CHECK(engine.step(hyper) == Approx(norm).epsilon(1e-5));
  const std::vector<std::vector<double>> got = parameters_of(engine, model);
  size_t apart = 0;
  for (size_t i = 0; i < want.size(); ++i)
    for (size_t j = 0; j < want[i].size(); ++j)
      apart += std::fabs(got[i][j] - want[i][j]) > 2e-6 + 1e-6 * std::fabs(want[i][j]);
  CHECK(apart == 0);
  CHECK(engine.loss_scale() == train::LossScaleState{65536.0, 1, 0});
}

// An overflow: at a scale of 2^120 the backward's fp16 operands overflow; the step is skipped (parameters,
// optimizer state and step count unchanged), the scale halved, the gradients zeroed. Then 1999 finite steps
// behind: the next step is taken and doubles the scale. And the state's round trip: two engines, one
// continued from the other's state, take the same next step bit for bit.
void check_overflow_and_growth(Backend& backend) {
  const Yolo26Model model = test::synthetic_trainable_yolo26n();
  const train::TrainBatch batch = two_images();
  train::StepHyper hyper;
  hyper.lr = {0.002, 0.0015, 0.004};
  DeviceTrainEngine engine(backend, model, "AdamW", batch.batch, kSize, kSize, Precision::Fp16);
  train::OptimizerState state = engine.optimizer_state();
  REQUIRE(state.loss_scale == train::LossScaleState{});
  state.loss_scale = train::LossScaleState{std::ldexp(1.0, 120), 7, 0};
  engine.load_optimizer_state(state);
  const std::vector<std::vector<double>> before = parameters_of(engine, model);
  engine.accumulate(batch, loss::LossConfig{});
  CHECK_FALSE(std::isfinite(engine.step(hyper)));
  CHECK(engine.loss_scale() == train::LossScaleState{std::ldexp(1.0, 119), 0, 1});
  CHECK(engine.optimizer_state().steps == 0);
  CHECK(parameters_of(engine, model) == before);
  CHECK(engine.optimizer_state().tensors == state.tensors);  // the skip happens on the device: no state moved
  size_t nonzero = 0;
  for (const ParameterGradient& p : engine.gradients())
    nonzero += size_t(std::count_if(p.values.begin(), p.values.end(), [](double v) { return v != 0; }));
  CHECK(nonzero == 0);

  state = engine.optimizer_state();
  state.loss_scale = train::LossScaleState{65536.0, 1999, 1};
  engine.load_optimizer_state(state);
  engine.accumulate(batch, loss::LossConfig{});
  CHECK(std::isfinite(engine.step(hyper)));
  CHECK(engine.loss_scale() == train::LossScaleState{131072.0, 0, 1});
  CHECK(engine.optimizer_state().steps == 1);
  CHECK(parameters_of(engine, model) != before);

  Yolo26Model saved = model;
  engine.read_parameters(saved);
  DeviceTrainEngine resumed(backend, saved, "AdamW", batch.batch, kSize, kSize, Precision::Fp16);
  resumed.load_optimizer_state(engine.optimizer_state());
  for (DeviceTrainEngine* e : {&engine, &resumed}) {
    e->accumulate(batch, loss::LossConfig{});
    e->step(hyper);
  }
  CHECK(parameters_of(engine, model) == parameters_of(resumed, model));
  CHECK(resumed.loss_scale() == engine.loss_scale());
  CHECK(resumed.optimizer_state().tensors == engine.optimizer_state().tensors);
}

}  // namespace

TEST_CASE("DeviceTrainEngine: fp16 and bf16 steps against fp32 on cpu", "[device_train_precision]") {
  auto backend = make_backend("cpu", test::embedded_context());
  check_variants(*backend);
  check_precision(*backend, Precision::Fp16, "cpu");
  check_precision(*backend, Precision::Bf16, "cpu");
}

TEST_CASE("DeviceTrainEngine: fp16 loss scaling (unscale before clip, overflow, growth, state) on cpu",
          "[device_train_precision]") {
  auto backend = make_backend("cpu", test::embedded_context());
  check_unscale_before_clip(*backend);
  check_overflow_and_growth(*backend);
}

TEST_CASE("DeviceTrainEngine: tf32 and mismatched loss-scale states are one-line errors",
          "[device_train_precision]") {
  auto backend = make_backend("cpu", test::embedded_context());
  const Yolo26Model model = test::synthetic_trainable_yolo26n();
  CHECK_THROWS_WITH(DeviceTrainEngine(*backend, model, "SGD", 1, kSize, kSize, Precision::Tf32),
                    "precision tf32: the device engine trains in fp32, fp16 or bf16");
  DeviceTrainEngine fp16(*backend, model, "SGD", 1, kSize, kSize, Precision::Fp16);
  DeviceTrainEngine bf16(*backend, model, "SGD", 1, kSize, kSize, Precision::Bf16);
  CHECK_THROWS_WITH(bf16.load_optimizer_state(fp16.optimizer_state()),
                    "optimizer state: a loss scale (fp16) for this run of bf16");
  CHECK_THROWS_WITH(fp16.load_optimizer_state(bf16.optimizer_state()),
                    "optimizer state: no loss scale for this fp16 run");
  train::OptimizerState bad = fp16.optimizer_state();
  bad.loss_scale->scale = 0;
  CHECK_THROWS_WITH(fp16.load_optimizer_state(bad),
                    "optimizer state: the loss scale is not a positive number");
  CHECK_FALSE(bf16.loss_scale().has_value());
}

TEST_CASE("DeviceTrainEngine: fp16 and bf16 steps against fp32 on cuda", "[device_train_precision][gpu]") {
  LAB_REQUIRE_GPU_OR_SKIP();
  auto backend = make_backend("cuda", test::embedded_context());
  check_variants(*backend);
  check_precision(*backend, Precision::Fp16, "cuda");
  check_precision(*backend, Precision::Bf16, "cuda");
  check_unscale_before_clip(*backend);
  check_overflow_and_growth(*backend);
}
