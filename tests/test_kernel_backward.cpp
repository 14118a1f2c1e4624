// The kernel backward of the whole network (pipeline/executor/kernel_backward) against the float64 reference
// backward (pipeline/reference/reference_backward): yolo26n on a seeded 64x64 image with three labels, on the
// cpu emulator, every one of the checkpoint's parameter gradients (both heads, BatchNorm chain rule) and the
// loss components, and a synthetic yolo26n at batch 2 on a rectangular input; the [gpu] twin: the kernel
// backward on cuda at 640 on bus.jpg against Ultralytics' gradients (goldens/bus_train_golden), with the grad
// golden test's bars. With batch-statistics BatchNorm (--bn batch, [batchnorm_batch]): the synthetic yolo26n
// at batch 2 against the reference's batch-statistics backward, and the running statistics the kernels moved
// against the reference's update from its own statistics; [gpu] twin.
#include <catch2/catch.hpp>

#include <cmath>

#include "kernels/compare.hpp"
#include "pipeline/executor/kernel_backward.hpp"
#include "pipeline/model/batchnorm_batch.hpp"
#include "pipeline/model/model_convs.hpp"
#include "pipeline/reference/reference_backward.hpp"
#include "tests/grad_golden_support.hpp"
#include "tests/network_test_support.hpp"
#include "tests/test_model_synthetic.hpp"
#include "tests/test_helpers.hpp"

using namespace lab;

namespace {

double l2(const std::vector<double>& v) {
  double sum = 0;
  for (double x : v) sum += x * x;
  return std::sqrt(sum);
}

bool ends_with(const std::string& s, const std::string& tail) {
  return s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
}

// Every parameter's gradient within `tolerance` relative L2 of the reference's (absolute for a zero one), and
// the loss components within 1e-4 relative. `batch_statistics`: the model's BatchNorm normalises with the
// batch's statistics.
// Returns the reference's gradients and the kernels' (for the running statistics).
std::pair<reference::NetworkGradients, TrainingGradients> compare_with_reference(
    const std::string& backend_name, const Yolo26Model& model, const std::vector<float>& image, int batch,
    int height, int width, const std::vector<std::vector<loss::GtBox>>& labels, double tolerance,
    bool batch_statistics = false) {
  auto backend = make_backend(backend_name, test::embedded_context());
  reference::RefTensor input(batch, 3, height, width);
  input.values = image;
  const reference::NetworkGradients want =
      reference::reference_gradients(model, input, labels, loss::LossConfig{});
  const TrainingGradients got =
      kernel_gradients(*backend, model, image, batch, height, width, labels, loss::LossConfig{});

  CHECK(got.total == Approx(want.loss.total).epsilon(1e-4));
  CHECK(got.one2many.positives == want.loss.one2many.positives);
  CHECK(got.one2one.positives == want.loss.one2one.positives);
  REQUIRE(got.parameters.size() == want.parameters.size());
  double worst = 0;
  std::string worst_name;
  for (size_t i = 0; i < want.parameters.size(); ++i) {
    const ParameterGradient &g = got.parameters[i], &w = want.parameters[i];
    REQUIRE(g.name == w.name);
    REQUIRE(g.values.size() == w.values.size());
    double rel = test::relative_l2(g.values, w.values);
    if (batch_statistics && ends_with(w.name, ".bn.bias")) {
      // d bn.bias = sum dz is exactly 0 where the BatchNorm feeds a batch-statistics conv without a SiLU
      // between (SPPF's cv1, attention's pe and proj: the next BatchNorm's du sums to 0 per channel and a 1x1
      // conv or a pool keeps that sum): the float32 sum's rounding against d bn.weight's scale there.
      const double scale = std::max(l2(w.values), l2(want.parameters[i - 1].values));
      if (scale > 0) rel = rel * (l2(w.values) > 0 ? l2(w.values) : 1.0) / scale;
    }
    INFO(w.name << ": relative L2 " << rel);
    CHECK(rel <= tolerance);
    if (rel > worst) worst = rel, worst_name = w.name;
  }
  CHECK(got.norm == Approx(want.norm).epsilon(tolerance));
  WARN(backend_name << ": " << want.parameters.size() << " parameter gradients, worst relative L2 " << worst
                    << " (" << worst_name << "), norm " << got.norm << " vs " << want.norm << ", positives "
                    << got.one2many.positives << " / " << got.one2one.positives);
  return {want, got};
}

// The synthetic yolo26n (3 classes) with batch-statistics BatchNorm at batch 2 on 64x64 against the
// reference's batch-statistics backward; each BatchNorm's running statistics after the kernels' forward
// against running_statistics_update_reference from the reference's batch statistics.
void compare_batch_statistics(const std::string& backend_name) {
  Yolo26Model model = Yolo26Model::from_checkpoint(
      test::synthetic_checkpoint({.scale = "n", .nc = 3, .one2many_head = true}));
  set_batchnorm_mode(model, BatchNormMode::Batch);
  const int batch = 2, size = 64;
  const std::vector<float> image = random_uniform(size_t(batch) * 3 * size * size, 0.0f, 1.0f, 22);
  const std::vector<std::vector<loss::GtBox>> labels = {{{0, 4, 6, 40, 50}, {2, 30, 10, 60, 40}},
                                                        {{1, 20, 24, 58, 62}}};
  // 5e-3, not frozen BatchNorm's 1e-4: the gradients are ill-conditioned with batch statistics of few values
  // a channel (8 at stride 32 here): each BatchNorm subtracts its channel's batch mean from float32 u and
  // divides by the batch deviation, through ~100 of them. Measured: nudging every input value by one ulp
  // moves the reference's own gradients by 8e-5 (median tensor) / 1.7e-4 (90th percentile), against 1e-8
  // with frozen BatchNorm; the kernels' float32 against the reference, 4.4e-4 / 5.7e-4, worst 1.2e-3 (the
  // one-to-one P3 box branch: its loss seed). A wrong statistics term or chain rule is O(0.1) or more
  // ([batchnorm_batch]'s kernel and reference checks).
  const auto [want, got] =
      compare_with_reference(backend_name, model, image, batch, size, size, labels, 5e-3, true);
  size_t moved = 0;
  double worst = 0;
  for_each_conv(model, [&](const ConvSpec& conv) {
    if (!conv.batch_statistics) return;
    const auto stats = want.batch_statistics.find(conv.name);
    const auto running = got.running_statistics.find(conv.name);
    REQUIRE(stats != want.batch_statistics.end());
    REQUIRE(running != got.running_statistics.end());
    std::vector<double> mean(conv.bn->mean.begin(), conv.bn->mean.end()),
        var(conv.bn->var.begin(), conv.bn->var.end());
    running_statistics_update_reference(mean, var, stats->second.stats, stats->second.count,
                                        kBatchNormMomentum);
    // The kernels' statistics of float32 u against the reference's float64 ones of its own u, both rounded
    // to float32: the running values (momentum 0.03 of them) within 1e-5 of their magnitude.
    const std::vector<double> got_mean(running->second.mean.begin(), running->second.mean.end()),
        got_var(running->second.var.begin(), running->second.var.end());
    const double rel = std::max(test::relative_l2(got_mean, mean), test::relative_l2(got_var, var));
    INFO(conv.name << ": running statistics relative L2 " << rel);
    CHECK(rel <= 1e-5);
    worst = std::max(worst, rel);
    moved += got_mean != std::vector<double>(conv.bn->mean.begin(), conv.bn->mean.end());
  });
  CHECK(moved == got.running_statistics.size());  // every BatchNorm's statistics moved
  WARN(backend_name << ": " << moved << " BatchNorms' running statistics, worst relative L2 " << worst);
}

}  // namespace

TEST_CASE("the kernel backward matches the reference backward at 64x64 on the cpu emulator",
          "[kernel_backward]") {
  const Yolo26Model* model = test::shared_yolo26n();
  if (!model) {
    WARN("skipped: the yolo26n checkpoint is absent");
    return;
  }
  const int size = 64;
  const std::vector<float> image = random_uniform(size_t(3) * size * size, 0.0f, 1.0f, 20);
  const std::vector<loss::GtBox> labels = {{0, 4, 6, 30, 50}, {5, 20, 18, 60, 40}, {2, 40, 44, 58, 62}};
  // 1e-4: float32 kernels (float32 sums in the convolutions, the attention and the weight gradients) against
  // float64 accumulation, through ~100 layers forward and back; measured worst 1.2e-5 of the 366 tensors.
  // A discrete change (an assignment or max-pool arg-max flip) or a wrong chain rule is O(0.1) or more
  // (the o2o head reading undetached features: 0.63).
  compare_with_reference("cpu", *model, image, 1, size, size, {labels}, 1e-4);
}

TEST_CASE(
    "the kernel backward matches the reference at batch 2 on a 64x96 input (synthetic yolo26n, 3 classes)",
    "[kernel_backward]") {
  const Yolo26Model model = Yolo26Model::from_checkpoint(
      test::synthetic_checkpoint({.scale = "n", .nc = 3, .one2many_head = true}));
  const int batch = 2, height = 64, width = 96;
  const std::vector<float> image = random_uniform(size_t(batch) * 3 * height * width, 0.0f, 1.0f, 21);
  // Image 0 with two boxes, image 1 with one: the loss's per-image assignment and the batch strides.
  const std::vector<std::vector<loss::GtBox>> labels = {{{0, 4, 6, 40, 50}, {2, 50, 10, 90, 60}},
                                                        {{1, 30, 20, 70, 62}}};
  compare_with_reference("cpu", model, image, batch, height, width, labels, 1e-4);
}

TEST_CASE("the kernel backward on cuda matches Ultralytics' gradients on bus.jpg at 640",
          "[kernel_backward][gpu]") {
  LAB_REQUIRE_GPU_OR_SKIP();
  const test::BusCase bus = test::load_bus_case();
  if (!bus.missing.empty()) {
    WARN("skipped: " << bus.missing << " is absent");
    return;
  }
  auto backend = make_backend("cuda", test::embedded_context());
  const TrainingGradients g = kernel_gradients(*backend, bus.model, bus.input.values, 1, bus.input.height,
                                               bus.input.width, {bus.labels}, loss::LossConfig{});
  CHECK(g.total == Approx(bus.bus_loss["total"].get<double>()).epsilon(1e-2));
  CHECK(g.norm == Approx(bus.golden["grad_norm_total"].get<double>()).epsilon(1e-3));
  test::check_gradients_against_golden(bus, g.parameters, "kernel backward, cuda");
}

TEST_CASE("the kernel backward with batch-statistics BatchNorm matches the reference's on the cpu emulator",
          "[kernel_backward][batchnorm_batch]") {
  compare_batch_statistics("cpu");
}

TEST_CASE("the kernel backward with batch-statistics BatchNorm matches the reference's on cuda",
          "[kernel_backward][batchnorm_batch][gpu]") {
  LAB_REQUIRE_GPU_OR_SKIP();
  compare_batch_statistics("cuda");
}
