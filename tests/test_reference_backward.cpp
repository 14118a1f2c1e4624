// The float64 reference backward of YOLO26 (pipeline/reference/reference_backward and its ops/modules):
// the fast convolution backward against the scatter-form kernels/nn reference (itself proven by finite
// differences), the max pool's tie rule, the BatchNorm chain rule, each module alone and the whole network by
// central finite differences on a synthetic yolo26n at 64x64: of a loss linear in both heads, and of the real
// loss (both heads; assignment and the other no-grad terms held fixed with ReferenceDetached). The finite
// differences see the one-to-one head on the unperturbed features (detached, as in training); the forward
// keeps float32 activations, so the probes are chosen with gradients well above its rounding.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <functional>
#include <random>

#include "kernels/nn/conv2d_backward_reference.hpp"
#include "pipeline/loss/loss_reference.hpp"
#include "pipeline/model/batchnorm_batch.hpp"
#include "pipeline/model/batchnorm_fold.hpp"
#include "pipeline/model/model_convs.hpp"
#include "pipeline/network.hpp"
#include "pipeline/reference/ref_backward_modules.hpp"
#include "pipeline/reference/ref_backward_ops.hpp"
#include "pipeline/reference/ref_ops.hpp"
#include "pipeline/reference/reference_backward.hpp"
#include "tests/test_model_synthetic.hpp"

using namespace lab;
using namespace lab::reference;

namespace {

std::vector<float> random_values(size_t n, uint64_t seed, float lo = -1, float hi = 1) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> u(lo, hi);
  std::vector<float> v(n);
  for (float& x : v) x = u(rng);
  return v;
}

ConvSpec random_conv(int c_in, int c_out, int kernel, int stride, int groups, bool silu, uint64_t seed) {
  ConvSpec c;
  c.name = "conv";
  c.c_in = c_in, c.c_out = c_out, c.kernel = kernel, c.stride = stride, c.groups = groups, c.silu = silu;
  c.weight = random_values(size_t(c_out) * (c_in / groups) * kernel * kernel, seed, -0.5f, 0.5f);
  c.bias = random_values(size_t(c_out), seed + 1, -0.5f, 0.5f);
  return c;
}

double rel_diff(const std::vector<double>& a, const std::vector<double>& b) {
  double num = 0, den = 0;
  for (size_t i = 0; i < a.size(); ++i) num += (a[i] - b[i]) * (a[i] - b[i]), den += b[i] * b[i];
  return std::sqrt(num / std::max(den, 1e-300));
}

// A synthetic yolo26n with both heads whose box branches start near 2x2 grid cells (last-conv bias 1), so
// the small ground-truth boxes below overlap predictions and get positives in both heads.
Yolo26Model small_model() {
  Yolo26Model model = Yolo26Model::from_checkpoint(
      test::synthetic_checkpoint({.scale = "n", .nc = 3, .one2many_head = true, .seed = 5}));
  DetectSpec& detect = model.layers.back().detect;
  for (auto* head : {&detect.levels, &detect.one2many})
    for (DetectLevelSpec& level : *head) level.box.back().bias.assign(4, 1.0f);
  return model;
}

const std::vector<std::vector<loss::GtBox>> kLabels = {
    {{0, 4, 6, 22, 26}, {2, 30, 20, 52, 38}, {1, 10, 36, 58, 62}}};

RefTensor small_input() {
  RefTensor x(1, 3, 64, 64);
  x.values = random_values(x.values.size(), 11, 0, 1);
  return x;
}

// The loss of both heads with the no-grad terms of `fixed` (assignment, target scores, CIoU alpha).
struct FixedTerms {
  loss::ReferenceDetached one2many, one2one;
};

// Both heads' raw outputs of `model` as training sees them: the one-to-many head on the model's own features,
// the one-to-one head on the features of the unperturbed forward `base` (detached: a perturbation before the
// head reaches the loss only through the one-to-many head).
struct DetachedHeads {
  HeadOutputs one2many, one2one;
};

DetachedHeads detached_forward(const Yolo26Model& model, const RefTensor& input,
                               const Yolo26Model& base_model, const NetworkTrace& base) {
  const NetworkTrace trace = trace_network(model, input);
  const DetectSpec& detect = model.layers.back().detect;
  return {trace.one2many.outputs,
          trace_head(detect.levels, detect.nc, head_levels(base_model, base)).outputs};
}

double fixed_loss(const Yolo26Model& model, const RefTensor& input, const Yolo26Model& base_model,
                  const NetworkTrace& base, const FixedTerms& fixed, const loss::LossConfig& config) {
  const DetachedHeads heads = detached_forward(model, input, base_model, base);
  loss::LossBatch batch = loss_batch(model, base, kLabels);
  batch.one2many = {heads.one2many.boxes, heads.one2many.logits};
  batch.one2one = {heads.one2one.boxes, heads.one2one.logits};
  const loss::HeadWeights w = loss::epoch_weights(config.epoch, config.epochs);
  const double m =
      loss::reference_head_loss(batch, loss::to_reference(batch.one2many), fixed.one2many, config, 1)
          .loss.sum();
  const double o =
      loss::reference_head_loss(batch, loss::to_reference(batch.one2one), fixed.one2one, config, 1)
          .loss.sum();
  return batch.batch * (w.one2many * m + w.one2one * o);
}

// A loss linear in both heads' raw outputs with O(1) weights `seed` (the same layout as the gradients):
// large parameter gradients, so the float32 activations' rounding stays far below the finite differences.
double linear_loss(const Yolo26Model& model, const RefTensor& input, const Yolo26Model& base_model,
                   const NetworkTrace& base, const loss::HeadGradients<double>& m,
                   const loss::HeadGradients<double>& o) {
  const DetachedHeads heads = detached_forward(model, input, base_model, base);
  double l = 0;
  auto add = [&](const std::vector<double>& w, const std::vector<float>& v) {
    for (size_t i = 0; i < w.size(); ++i) l += w[i] * v[i];
  };
  add(m.boxes, heads.one2many.boxes);
  add(m.scores, heads.one2many.logits);
  add(o.boxes, heads.one2one.boxes);
  add(o.scores, heads.one2one.logits);
  return l;
}

std::vector<double> random_doubles(size_t n, uint64_t seed) {
  const std::vector<float> f = random_values(n, seed);
  return std::vector<double>(f.begin(), f.end());
}

// Adds delta to element `index` of the checkpoint parameter `name` and refolds its conv; returns the change
// actually made (the parameters are float32).
double perturb(Yolo26Model& model, const std::string& name, size_t index, double delta) {
  double applied = 0;
  bool found = false;
  for_each_conv(model, [&](ConvSpec& conv) {
    for (const ParameterRef& p : conv_parameters(conv)) {
      if (p.name != name) continue;
      found = true;
      float& v = p.values->at(index);
      const float before = v;
      v = float(double(v) + delta);
      applied = double(v) - double(before);
      fold_batchnorm(conv);
    }
  });
  REQUIRE(found);
  return applied;
}

}  // namespace

TEST_CASE("reference backward: the convolution backward equals the scatter-form reference",
          "[reference_backward]") {
  struct Case {
    int c_in, c_out, kernel, stride, groups;
    bool silu;
    int h, w;
  };
  const Case cases[] = {{3, 16, 3, 2, 1, true, 13, 10},  {8, 12, 3, 1, 1, true, 9, 7},
                        {12, 12, 3, 1, 12, true, 8, 11}, {10, 6, 1, 1, 1, false, 5, 6},
                        {16, 9, 1, 1, 1, true, 4, 4},    {6, 6, 3, 2, 6, false, 7, 9},
                        {4, 20, 3, 1, 2, true, 6, 5}};
  uint64_t seed = 100;
  for (const Case& c : cases) {
    CAPTURE(c.c_in, c.c_out, c.kernel, c.stride, c.groups, c.silu, c.h, c.w);
    const ConvSpec spec = random_conv(c.c_in, c.c_out, c.kernel, c.stride, c.groups, c.silu, seed += 10);
    RefTensor x(2, c.c_in, c.h, c.w);
    x.values = random_values(x.values.size(), seed + 2);
    const RefTensor z = conv2d_linear(spec, x);
    RefGrad dy(2, c.c_out, z.height, z.width);
    const std::vector<float> dy_f = random_values(dy.values.size(), seed + 3);
    dy.values.assign(dy_f.begin(), dy_f.end());

    ConvGradients grads;
    const RefGrad dx = conv2d_backward(spec, x, z, dy, grads);
    const Conv2dGradients ref =
        conv2d_backward_reference({c.c_in, c.c_out, c.kernel, c.stride, c.groups, c.silu}, 2, c.h, c.w,
                                  x.values, spec.weight, spec.bias, dy_f);
    // z is kept in float32 (as the activations), the scatter reference recomputes it in float64: silu'
    // differs by about 1e-7 relative.
    CHECK(rel_diff(dx.values, ref.grad_in) < 1e-6);
    CHECK(rel_diff(grads["conv"].weight, ref.grad_weight) < 1e-6);
    CHECK(rel_diff(grads["conv"].bias, ref.grad_bias) < 1e-6);
  }
}

TEST_CASE("reference backward: max pool sends the gradient to the first maximum of each window",
          "[reference_backward]") {
  // PyTorch's max_pool2d_with_indices (CPU and CUDA) scans the window row by row and replaces the arg-max
  // only on a strictly greater value, so of equal maxima the first in scan order takes the gradient.
  RefTensor x(1, 1, 3, 3);
  x.values = {1, 5, 5,  //
              0, 5, 2,  //
              3, 1, 4};
  RefGrad dy(1, 1, 3, 3);
  dy.values.assign(9, 1.0);
  const RefGrad dx = maxpool_same_backward(x, 5, dy);  // every window covers the whole image
  CHECK(dx.values == std::vector<double>{0, 9, 0, 0, 0, 0, 0, 0, 0});
  const RefGrad dx3 = maxpool_same_backward(x, 3, dy);
  // Windows (3x3, clipped): the top-left 2x2 window's first 5 is (0,1); (2,0)'s window covers rows 1-2,
  // columns 0-1: max 5 at (1,1); (2,1) and (2,2) cover rows 1-2 too: 5 at (1,1).
  CHECK(dx3.values == std::vector<double>{0, 6, 0, 0, 3, 0, 0, 0, 0});
}

TEST_CASE("reference backward: the BatchNorm chain rule matches finite differences of the fold",
          "[reference_backward]") {
  ConvSpec conv = random_conv(6, 5, 3, 1, 1, true, 7);
  conv.name = "model.4.m.0.cv1";
  conv.conv_weight = conv.weight;
  conv.bn = FrozenBatchNorm{random_values(5, 8, 0.5f, 1.5f), random_values(5, 9, -0.3f, 0.3f),
                            random_values(5, 10, -0.4f, 0.4f), random_values(5, 12, 0.2f, 1.2f), 1e-3};
  fold_batchnorm(conv);
  // A loss linear in the folded parameters: L = sum(gw * w') + sum(gb * b'); its gradients in the
  // checkpoint's parameters come from conv_parameter_gradients(conv, gw, gb).
  const std::vector<float> gw_f = random_values(conv.weight.size(), 13), gb_f = random_values(5, 14);
  const std::vector<double> gw(gw_f.begin(), gw_f.end()), gb(gb_f.begin(), gb_f.end());
  auto loss = [&](const ConvSpec& c) {
    double l = 0;
    for (size_t i = 0; i < gw.size(); ++i) l += gw[i] * c.weight[i];
    for (size_t o = 0; o < gb.size(); ++o) l += gb[o] * c.bias[o];
    return l;
  };
  const std::vector<ParameterGradient> grads = conv_parameter_gradients(conv, gw, gb);
  REQUIRE(grads.size() == 3);
  CHECK(grads[0].name == "model.4.m.0.cv1.conv.weight");
  CHECK(grads[1].name == "model.4.m.0.cv1.bn.weight");
  CHECK(grads[2].name == "model.4.m.0.cv1.bn.bias");
  const std::vector<std::vector<float>*> params = {&conv.conv_weight, &conv.bn->gamma, &conv.bn->beta};
  for (size_t p = 0; p < params.size(); ++p)
    for (size_t i = 0; i < params[p]->size(); i += 7) {
      ConvSpec plus = conv, minus = conv;
      const float h = 1.0f / 64;
      (*std::vector<std::vector<float>*>{&plus.conv_weight, &plus.bn->gamma, &plus.bn->beta}[p])[i] += h;
      (*std::vector<std::vector<float>*>{&minus.conv_weight, &minus.bn->gamma, &minus.bn->beta}[p])[i] -= h;
      fold_batchnorm(plus);
      fold_batchnorm(minus);
      const double numeric = (loss(plus) - loss(minus)) / (2.0 * h);
      INFO(grads[p].name << "[" << i << "] analytic " << grads[p].values[i] << " numeric " << numeric);
      CHECK(std::abs(grads[p].values[i] - numeric) <= 1e-4 * std::max(1.0, std::abs(numeric)));
    }
}

namespace {

const std::vector<std::pair<std::string, size_t>> kProbes = {
    {"model.0.conv.weight", 5},                   // stem Conv, stride 2
    {"model.0.bn.weight", 3},                     // BatchNorm gamma
    {"model.1.bn.bias", 7},                       // BatchNorm beta
    {"model.2.m.0.cv2.conv.weight", 11},          // C3k2 Bottleneck
    {"model.2.cv1.bn.weight", 2},                 // C3k2 split
    {"model.6.m.0.cv3.conv.weight", 19},          // C3k
    {"model.6.m.0.m.1.cv1.bn.bias", 4},           // C3k Bottleneck
    {"model.9.cv1.conv.weight", 40},              // SPPF (no SiLU) before the pools
    {"model.9.cv2.bn.weight", 9},                 // SPPF after the pools
    {"model.10.m.0.attn.qkv.conv.weight", 300},   // C2PSA attention: q/k/v
    {"model.10.m.0.attn.pe.conv.weight", 17},     // positional depthwise conv
    {"model.10.m.0.attn.proj.bn.bias", 6},        // proj
    {"model.10.m.0.ffn.1.conv.weight", 123},      // PSABlock ffn
    {"model.13.cv2.conv.weight", 50},             // neck after Upsample + Concat
    {"model.17.conv.weight", 77},                 // downsampling Conv of the PAN
    {"model.22.m.0.1.attn.qkv.bn.weight", 9},     // C3k2 with PSABlock
    {"model.22.m.0.0.cv1.conv.weight", 31},       // its Bottleneck
    {"model.23.cv2.0.0.conv.weight", 21},         // one-to-many box branch
    {"model.23.cv2.1.2.bias", 2},                 // its last Conv2d bias
    {"model.23.cv3.2.0.0.bn.weight", 3},          // one-to-many class branch, depthwise
    {"model.23.cv3.0.2.weight", 40},              // its last Conv2d weight
    {"model.23.one2one_cv2.0.1.conv.weight", 8},  // one-to-one box branch (detached features)
    {"model.23.one2one_cv3.1.1.1.bn.bias", 5},    // one-to-one class branch
    {"model.23.one2one_cv3.2.2.bias", 1},
};

// Central difference of `loss` in parameter `name`[index] with step h.
double numeric_gradient(const Yolo26Model& model, const std::string& name, size_t index, double h,
                        const std::function<double(const Yolo26Model&)>& loss) {
  Yolo26Model plus = model, minus = model;
  const double up = perturb(plus, name, index, h), down = perturb(minus, name, index, -h);
  return (loss(plus) - loss(minus)) / (up - down);
}

const ParameterGradient& find_gradient(const std::vector<ParameterGradient>& grads, const std::string& name) {
  const auto it =
      std::find_if(grads.begin(), grads.end(), [&](const ParameterGradient& p) { return p.name == name; });
  INFO("parameter " << name);
  REQUIRE(it != grads.end());
  return *it;
}

}  // namespace

TEST_CASE("reference backward: every module kind matches finite differences of a loss linear in both heads",
          "[reference_backward]") {
  const Yolo26Model model = small_model();
  const RefTensor input = small_input();
  const NetworkTrace trace = trace_network(model, input);
  const size_t boxes = trace.one2many.outputs.boxes.size(), scores = trace.one2many.outputs.logits.size();
  const loss::HeadGradients<double> m{random_doubles(boxes, 21), random_doubles(scores, 22)};
  const loss::HeadGradients<double> o{random_doubles(boxes, 23), random_doubles(scores, 24)};
  const std::vector<ParameterGradient> analytic =
      parameter_gradients(model, backward_network(model, trace, m, o));
  for (const auto& [name, index] : kProbes) {
    const double value = find_gradient(analytic, name).values.at(index);
    const double numeric = numeric_gradient(model, name, index, 1e-2, [&](const Yolo26Model& mm) {
      return linear_loss(mm, input, model, trace, m, o);
    });
    INFO(name << "[" << index << "] analytic " << value << " numeric " << numeric);
    CHECK(std::abs(value - numeric) <= 1e-3 * std::abs(numeric) + 1e-3);
  }
}

TEST_CASE("reference backward: batch-statistics BatchNorm normalises each conv with its batch's statistics",
          "[reference_backward][batchnorm_batch]") {
  Yolo26Model model = small_model();
  set_batchnorm_mode(model, BatchNormMode::Batch);
  RefTensor input(2, 3, 64, 64);
  input.values = random_values(input.values.size(), 12, 0, 1);
  const NetworkTrace trace = trace_network(model, input);
  // Per channel of the stem, z has mean beta and variance gamma^2 var(u) / (var(u) + eps), u being the
  // conv's output before the BatchNorm.
  const ConvTrace& stem = trace.layers[0].conv;
  const FrozenBatchNorm& bn = *model.layers[0].conv.bn;
  for (int c = 0; c < stem.z.channels; ++c) {
    double zu[2] = {0, 0}, zz[2] = {0, 0};
    for (int b = 0; b < stem.z.batch; ++b)
      for (size_t i = 0; i < stem.z.plane(); ++i) {
        const double u = stem.u.channel(b, c)[i], z = stem.z.channel(b, c)[i];
        zu[0] += u, zu[1] += u * u, zz[0] += z, zz[1] += z * z;
      }
    const double n = double(stem.z.batch) * stem.z.plane(), mean_z = zz[0] / n, mean_u = zu[0] / n;
    const double var_u = zu[1] / n - mean_u * mean_u, var_z = zz[1] / n - mean_z * mean_z;
    const double gamma = bn.gamma[size_t(c)];
    CHECK(mean_z == Approx(bn.beta[size_t(c)]).margin(1e-5));
    CHECK(var_z == Approx(gamma * gamma * var_u / (var_u + bn.eps)).epsilon(1e-4));
  }
}

TEST_CASE("reference backward: the real loss (assignment held fixed) matches finite differences",
          "[reference_backward]") {
  const Yolo26Model model = small_model();
  const RefTensor input = small_input();
  const loss::LossConfig config;
  const NetworkTrace trace = trace_network(model, input);
  const loss::LossBatch batch = loss_batch(model, trace, kLabels);
  const FixedTerms fixed{loss::reference_detached(batch, loss::to_reference(batch.one2many), config.one2many),
                         loss::reference_detached(batch, loss::to_reference(batch.one2one), config.one2one)};
  REQUIRE(fixed.one2many.positives > 0);
  REQUIRE(fixed.one2one.positives > 0);
  const NetworkGradients analytic = reference_gradients(model, input, kLabels, config);
  CHECK(analytic.loss.total == Approx(fixed_loss(model, input, model, trace, fixed, config)).epsilon(1e-12));
  // The loss is normalised, so most parameters' gradients are ~1e-4, near the float32 forward's rounding;
  // these parameters have gradients well above it.
  const std::vector<std::pair<std::string, size_t>> probes = {
      {"model.23.cv3.0.2.bias", 0},         {"model.23.cv3.1.2.bias", 2},
      {"model.23.cv2.0.2.bias", 1},         {"model.23.one2one_cv3.0.2.bias", 1},
      {"model.23.one2one_cv2.0.2.bias", 3}, {"model.23.cv3.0.2.weight", 7},
      {"model.22.cv2.bn.bias", 3},          {"model.16.cv2.bn.weight", 5}};
  for (const auto& [name, index] : probes) {
    const double value = find_gradient(analytic.parameters, name).values.at(index);
    const double numeric = numeric_gradient(model, name, index, 1e-3, [&](const Yolo26Model& mm) {
      return fixed_loss(mm, input, model, trace, fixed, config);
    });
    INFO(name << "[" << index << "] analytic " << value << " numeric " << numeric);
    CHECK(std::abs(value - numeric) <= 1e-2 * std::abs(numeric) + 2e-5);
  }
}

TEST_CASE("reference backward: the one-to-one head reads detached features", "[reference_backward]") {
  const Yolo26Model model = small_model();
  const NetworkTrace trace = trace_network(model, small_input());
  const loss::LossBatch batch = loss_batch(model, trace, kLabels);
  const loss::LossResultT<double> loss = loss::reference_loss(batch, loss::LossConfig{});
  // Only the one-to-one head's gradient: its own parameters get gradients, nothing before it does.
  loss::HeadGradients<double> none{std::vector<double>(loss.d_one2many.boxes.size()),
                                   std::vector<double>(loss.d_one2many.scores.size())};
  const std::vector<ParameterGradient> grads =
      parameter_gradients(model, backward_network(model, trace, none, loss.d_one2one));
  for (const ParameterGradient& p : grads) {
    double sum = 0;
    for (double v : p.values) sum += v * v;
    INFO(p.name);
    if (p.name.rfind("model.23.one2one_cv3", 0) == 0 && p.name.find("bn.bias") != std::string::npos)
      CHECK(sum > 0);  // every anchor's class logits get a BCE gradient
    if (p.name.rfind("model.23.one2one_", 0) != 0) CHECK(sum == 0);
  }
}

TEST_CASE("reference backward: a model without the one-to-many head is refused", "[reference_backward]") {
  const Yolo26Model model = Yolo26Model::from_checkpoint(test::synthetic_checkpoint({.scale = "n", .nc = 3}));
  CHECK_THROWS_WITH(trace_network(model, small_input()), Catch::Contains("no one-to-many head"));
}

namespace {

// A module's traced forward output and its backward, for module-level finite differences.
struct ModuleUnderTest {
  std::function<RefTensor(const Yolo26Model&, const RefTensor&)> forward;
  std::function<RefGrad(const Yolo26Model&, const RefTensor&, const RefGrad&, ConvGradients&)> backward;
};

// Checks a module's parameter gradients (`probes`) and input gradient (a few elements) against central
// differences of L = sum(r * out) with O(1) weights r.
void check_module(const Yolo26Model& model, const ModuleUnderTest& m, RefTensor x,
                  const std::vector<std::pair<std::string, size_t>>& probes) {
  const RefTensor out = m.forward(model, x);
  RefGrad r(out.batch, out.channels, out.height, out.width);
  r.values = random_doubles(out.values.size(), 31);
  auto loss = [&](const Yolo26Model& mm, const RefTensor& xx) {
    const RefTensor y = m.forward(mm, xx);
    double l = 0;
    for (size_t i = 0; i < y.values.size(); ++i) l += r.values[i] * y.values[i];
    return l;
  };
  ConvGradients grads;
  const RefGrad dx = m.backward(model, x, r, grads);
  const std::vector<ParameterGradient> params = parameter_gradients(model, grads);
  for (const auto& [name, index] : probes) {
    const double value = find_gradient(params, name).values.at(index);
    const double numeric =
        numeric_gradient(model, name, index, 1e-2, [&](const Yolo26Model& mm) { return loss(mm, x); });
    INFO(name << "[" << index << "] analytic " << value << " numeric " << numeric);
    CHECK(std::abs(value - numeric) <= 1e-3 * std::abs(numeric) + 1e-3);
  }
  for (size_t i = 0; i < x.values.size(); i += x.values.size() / 5 + 1) {
    const float original = x.values[i];
    x.values[i] = original + 1e-2f;
    const double up = loss(model, x);
    const double plus = x.values[i];
    x.values[i] = original - 1e-2f;
    const double down = loss(model, x);
    const double numeric = (up - down) / (plus - double(x.values[i]));
    x.values[i] = original;
    INFO("input[" << i << "] analytic " << dx.values[i] << " numeric " << numeric);
    CHECK(std::abs(dx.values[i] - numeric) <= 1e-3 * std::abs(numeric) + 1e-3);
  }
}

RefTensor random_input(int channels, int h, int w, uint64_t seed) {
  RefTensor x(1, channels, h, w);
  x.values = random_values(x.values.size(), seed);
  return x;
}

const LayerSpec& layer(const Yolo26Model& m, int i) {
  return m.layers[size_t(i)];
}

}  // namespace

namespace {

// The C3k2 of layer `index` as a module under test.
ModuleUnderTest c3k2_layer(int index) {
  return {
      [index](const Yolo26Model& m, const RefTensor& x) { return trace_c3k2(layer(m, index).c3k2, x).cv2.y; },
      [index](const Yolo26Model& m, const RefTensor& x, const RefGrad& dy, ConvGradients& g) {
        const C3k2Spec& spec = layer(m, index).c3k2;
        return backward_c3k2(spec, x, trace_c3k2(spec, x), dy, g);
      }};
}

// The C3k2 with Bottleneck (layer 2) and with C3k (layer 6), inputs seeded from `seed` and `seed + 1`.
void check_c3k2_modules(const Yolo26Model& model, uint64_t seed) {
  check_module(
      model, c3k2_layer(2), random_input(layer(model, 1).out_channels, 6, 5, seed),
      {{"model.2.cv1.bn.weight", 2}, {"model.2.m.0.cv1.conv.weight", 9}, {"model.2.cv2.bn.bias", 4}});
  check_module(model, c3k2_layer(6), random_input(layer(model, 5).out_channels, 4, 4, seed + 1),
               {{"model.6.m.0.cv3.conv.weight", 19},
                {"model.6.m.0.m.1.cv1.bn.bias", 4},
                {"model.6.m.0.cv2.bn.weight", 1}});
}

}  // namespace

// Module-level finite differences with batch-statistics BatchNorm (the network's own max pools and maps
// of a few values make whole-network differences too rough: kinks where a pool's maximum changes).
TEST_CASE("reference backward: modules with batch-statistics BatchNorm match finite differences",
          "[reference_backward][batchnorm_batch]") {
  Yolo26Model model = small_model();
  set_batchnorm_mode(model, BatchNormMode::Batch);
  check_c3k2_modules(model, 51);
}

TEST_CASE("reference backward: each module matches finite differences on its own", "[reference_backward]") {
  const Yolo26Model model = small_model();
  SECTION("C3k2 with Bottleneck (layer 2) and with C3k (layer 6)") { check_c3k2_modules(model, 41); }
  SECTION("C3k2 with Bottleneck + PSABlock (layer 22)") {
    check_module(model, c3k2_layer(22), random_input(layer(model, 21).out_channels, 2, 3, 45),
                 {{"model.22.m.0.1.attn.qkv.bn.weight", 9},
                  {"model.22.m.0.0.cv1.conv.weight", 31},
                  {"model.22.m.0.1.attn.proj.bn.bias", 2}});
  }
  SECTION("SPPF (layer 9): the pools' gradients") {
    check_module(
        model,
        {[](const Yolo26Model& m, const RefTensor& x) { return trace_sppf(layer(m, 9).sppf, x).out; },
         [](const Yolo26Model& m, const RefTensor& x, const RefGrad& dy, ConvGradients& g) {
           return backward_sppf(layer(m, 9).sppf, x, trace_sppf(layer(m, 9).sppf, x), dy, g);
         }},
        random_input(layer(model, 8).out_channels, 4, 3, 43),
        {{"model.9.cv1.conv.weight", 40}, {"model.9.cv1.bn.bias", 3}, {"model.9.cv2.bn.weight", 9}});
  }
  SECTION("C2PSA (layer 10): attention, pe, proj, ffn") {
    check_module(
        model,
        {[](const Yolo26Model& m, const RefTensor& x) { return trace_c2psa(layer(m, 10).c2psa, x).cv2.y; },
         [](const Yolo26Model& m, const RefTensor& x, const RefGrad& dy, ConvGradients& g) {
           return backward_c2psa(layer(m, 10).c2psa, x, trace_c2psa(layer(m, 10).c2psa, x), dy, g);
         }},
        random_input(layer(model, 9).out_channels, 3, 4, 44),
        {{"model.10.m.0.attn.qkv.conv.weight", 300},
         {"model.10.m.0.attn.pe.conv.weight", 17},
         {"model.10.m.0.attn.proj.bn.bias", 6},
         {"model.10.m.0.ffn.1.conv.weight", 123},
         {"model.10.cv1.bn.weight", 7}});
  }
}

TEST_CASE("reference backward: the traced forward gives the reference network's both heads",
          "[reference_backward]") {
  const Yolo26Model model = small_model();
  const RefTensor input = small_input();
  const auto net = make_reference_network(model);
  net->forward(input.values.data(), 1, 64, 64);
  const NetworkTrace trace = trace_network(model, input);
  const std::vector<std::pair<std::string, const std::vector<float>*>> heads = {
      {"head.boxes", &trace.one2one.outputs.boxes},
      {"head.scores", &trace.one2one.outputs.logits},
      {"head.one2many.boxes", &trace.one2many.outputs.boxes},
      {"head.one2many.scores", &trace.one2many.outputs.logits}};
  for (const auto& [name, traced] : heads) {
    const NamedTensor t = net->tensor(name);
    CAPTURE(name);
    CHECK(t.shape[2] == 8 * 8 + 4 * 4 + 2 * 2);
    // The trace rounds each pre-activation to float32 before SiLU: about 1e-7 relative per layer.
    CHECK(rel_diff(std::vector<double>(t.values.begin(), t.values.end()),
                   std::vector<double>(traced->begin(), traced->end())) < 1e-5);
  }
}
