// The reference optimizer over a model's checkpoint parameters (pipeline/reference/reference_optimizer):
// Ultralytics' groups (decay only on conv and Conv2d weights), the clip at norm 10, the refold.
#include <catch2/catch.hpp>

#include <cmath>

#include "pipeline/model/model_convs.hpp"
#include "pipeline/reference/reference_optimizer.hpp"
#include "tests/test_model_synthetic.hpp"

using namespace lab;
using namespace lab::reference;

namespace {

// Gradients of every parameter of `model`, each element `value`.
std::vector<ParameterGradient> constant_gradients(Yolo26Model& model, double value) {
  std::vector<ParameterGradient> grads;
  for_each_conv(model, [&](ConvSpec& conv) {
    for (const ParameterRef& p : conv_parameters(conv))
      grads.push_back({p.name, {int64_t(p.values->size())}, std::vector<double>(p.values->size(), value)});
  });
  return grads;
}

}  // namespace

TEST_CASE("reference optimizer: weight decay only on the weights group, BatchNorm refolded",
          "[reference_optimizer]") {
  Yolo26Model model = Yolo26Model::from_checkpoint(
      test::synthetic_checkpoint({.scale = "n", .nc = 3, .one2many_head = true}));
  const Yolo26Model before = model;
  ReferenceOptimizer sgd({.name = "SGD", .lr = 0.1, .momentum = 0.5, .weight_decay = 0.01});
  sgd.step(model, constant_gradients(model, 0.0));
  // Step 1 with a zero gradient: d = wd * p, buf = d, p -= lr * (d + momentum * d) = p * (1 - 0.1 * 0.015).
  const ConvSpec& conv = model.layers[0].conv;
  const ConvSpec& old = before.layers[0].conv;
  CHECK(conv.conv_weight[3] == Approx(old.conv_weight[3] * (1 - 0.1 * 0.01 * 1.5)).epsilon(1e-6));
  CHECK(conv.bn->gamma == old.bn->gamma);
  CHECK(conv.bn->beta == old.bn->beta);
  CHECK(conv.weight[3] == Approx(old.weight[3] * (1 - 0.1 * 0.01 * 1.5)).epsilon(1e-6));  // refolded
  const ConvSpec& last =
      model.layers[23].detect.one2many[0].cls[4];  // a plain Conv2d: weight decays, bias not
  const ConvSpec& last_old = before.layers[23].detect.one2many[0].cls[4];
  CHECK(last.weight[2] == Approx(last_old.weight[2] * (1 - 0.1 * 0.01 * 1.5)).epsilon(1e-6));
  CHECK(last.bias == last_old.bias);
}

TEST_CASE("reference optimizer: the gradient norm is clipped at 10", "[reference_optimizer]") {
  Yolo26Model model = Yolo26Model::from_checkpoint(
      test::synthetic_checkpoint({.scale = "n", .nc = 3, .one2many_head = true}));
  const Yolo26Model before = model;
  std::vector<ParameterGradient> grads = constant_gradients(model, 1.0);
  size_t count = 0;
  for (const ParameterGradient& g : grads) count += g.values.size();
  ReferenceOptimizer sgd({.name = "SGD", .lr = 0.1, .momentum = 0.0, .weight_decay = 0.0});
  sgd.step(model, grads);
  // Every gradient element scaled by 10 / (sqrt(count) + 1e-6): beta moves by lr times that.
  const double clipped = 10.0 / (std::sqrt(double(count)) + 1e-6);
  CHECK(model.layers[0].conv.bn->beta[1] ==
        Approx(before.layers[0].conv.bn->beta[1] - 0.1 * clipped).epsilon(1e-6));
  CHECK_THROWS_WITH(ReferenceOptimizer({.name = "Adam"}), Catch::Contains("SGD, AdamW or MuSGD"));
}
