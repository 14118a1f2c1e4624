// `lab grad`'s computation (load_training_image + reference_gradients) on bus.jpg (square 640, the five
// labels of bus_labels.txt) against Ultralytics 8.4.104's E2ELoss gradients (goldens/bus_train_golden.*):
// every one of the 366 parameter tensors within relative L2 1e-2 of the bf16 golden (bf16 keeps about 3
// significant digits: 2^-9 relative rounding) and its L2 norm within 1e-3 of the golden's float64 norm; the
// loss components as bus_loss.json's (cls with PyTorch's float32 formula, see check_head). One test case: the
// forward + backward at 640 runs once per CI run. Skips with a WARN when the assets are absent.
#include <catch2/catch.hpp>

#include <chrono>
#include <cmath>
#include <cstdio>

#include <nlohmann/json.hpp>

#include "pipeline/reference/reference_backward.hpp"
#include "pipeline/reference/reference_optimizer.hpp"
#include "tests/grad_golden_support.hpp"
#include "tests/loss_test_support.hpp"

using namespace lab;

namespace {

// box and l1 as the golden's; cls through PyTorch's float32 formula on our heads and assignment (ours, the
// float64 BCE, is 0.4% higher: the golden's float32 BCE cancels the far-negative background terms to 0, see
// docs/loss.md). Returns the component sum with the float32 cls.
double check_head(const nlohmann::json& golden, const loss::HeadLoss& ours, double torch_cls,
                  const char* head) {
  INFO(head << ": box " << ours.box << " vs " << golden["box_loss"] << ", cls " << ours.cls << " (float32 "
            << torch_cls << ") vs " << golden["cls_loss"] << ", l1 " << ours.l1 << " vs "
            << golden["l1_loss"]);
  CHECK(ours.box == Approx(golden["box_loss"].get<double>()).epsilon(1e-4));
  CHECK(torch_cls == Approx(golden["cls_loss"].get<double>()).epsilon(1e-4));
  CHECK(ours.l1 == Approx(golden["l1_loss"].get<double>()).epsilon(1e-4));
  return ours.box + torch_cls + ours.l1;
}

}  // namespace

TEST_CASE("grad golden: lab grad on bus.jpg matches Ultralytics' gradients of all 366 parameters",
          "[grad_golden]") {
  const test::BusCase bus = test::load_bus_case();
  if (!bus.missing.empty()) {
    WARN("skipped: " << bus.missing << " is absent");
    return;
  }
  REQUIRE(bus.input.height == 640);
  REQUIRE(bus.input.width == 640);

  const auto start = std::chrono::steady_clock::now();
  const reference::NetworkGradients g =
      reference::reference_gradients(bus.model, bus.input, {bus.labels}, loss::LossConfig{});
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::printf("grad golden: forward + loss + backward of yolo26n at 640x640 in %.1f s\n", seconds);

  const nlohmann::json &golden = bus.golden, &bus_loss = bus.bus_loss;
  const loss::LossConfig config;
  const double o2m = check_head(bus_loss["one2many"], g.loss.one2many,
                                torch_float32_cls(g.batch, g.batch.one2many, config.one2many), "one2many");
  const double o2o = check_head(bus_loss["one2one"], g.loss.one2one,
                                torch_float32_cls(g.batch, g.batch.one2one, config.one2one), "one2one");
  CHECK(g.loss.weights.one2many * o2m + g.loss.weights.one2one * o2o ==
        Approx(bus_loss["total"].get<double>()).epsilon(1e-4));
  std::printf("grad golden: total %.9g (golden %.9g), gradient norm %.9g (golden %.9g)\n", g.loss.total,
              bus_loss["total"].get<double>(), g.norm, golden["grad_norm_total"].get<double>());
  CHECK(g.norm == Approx(golden["grad_norm_total"].get<double>()).epsilon(1e-3));

  test::check_gradients_against_golden(bus, g.parameters, "float64 reference");
}

TEST_CASE("grad golden: three AdamW and three SGD steps on bus.jpg reproduce the golden's losses within 2%",
          "[grad_golden_steps]") {
  const test::BusCase bus = test::load_bus_case();
  if (!bus.missing.empty()) {
    WARN("skipped: " << bus.missing << " is absent");
    return;
  }
  // As the golden: Ultralytics' groups (decay 5e-4 on weights), clip at 10, no warm-up, no EMA.
  const std::vector<reference::OptimizerSettings> optimizers = {
      {.name = "AdamW", .lr = 0.000119, .momentum = 0.9}, {.name = "SGD", .lr = 0.01, .momentum = 0.937}};
  for (const reference::OptimizerSettings& settings : optimizers) {
    const std::vector<double> expected =
        bus.golden["optimizer_steps"][settings.name]["loss_before_and_after_each_step"]
            .get<std::vector<double>>();
    const std::vector<double> losses = reference::reference_step_losses(
        bus.model, bus.input, {bus.labels}, loss::LossConfig{}, settings, int(expected.size()) - 1);
    REQUIRE(losses.size() == expected.size());
    for (size_t i = 0; i < losses.size(); ++i) {
      std::printf("grad golden steps: %s after %zu steps: loss %.6g (golden %.6g, %+.2f%%)\n",
                  settings.name.c_str(), i, losses[i], expected[i], 100 * (losses[i] / expected[i] - 1));
      INFO(settings.name << " after " << i << " steps: " << losses[i] << " vs " << expected[i]);
      CHECK(losses[i] == Approx(expected[i]).epsilon(0.02));
    }
  }
}
