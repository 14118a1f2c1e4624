// The kernel executor (our run-time-compiled kernels chained through the arena and replayed as a graph)
// against the CPU reference forward, tensor by tensor: on the cpu backend (the emulator) at a small
// rectangular input with batch 2, and on the GPU at 640x640 on the golden input. float32 kernels against a
// float64-accumulating reference: relative L2 under 1e-4 per layer, the bar. The same at
// Precision::Tf32 / Fp16 / Bf16 (dense convs on tensor cores) with the looser bars below. Each comparison prints
// its worst tensor.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdio>
#include <filesystem>

#include "kernels/common/half_type.hpp"
#include "kernels/compare.hpp"
#include "tests/counting_backend.hpp"
#include "tests/delayed_lanes_backend.hpp"
#include "tests/network_compare.hpp"
#include "tests/network_test_support.hpp"
#include "pipeline/executor/activation_layout.hpp"
#include "pipeline/executor/network_ops.hpp"
#include "pipeline/network.hpp"
#include "nvrtc_runtime/runtime_context.hpp"
#include "tests/test_helpers.hpp"

using namespace lab;

TEST_CASE("kernel network on the cpu emulator matches the reference forward layer by layer", "[network]") {
  LAB_SHARED_YOLO26N_OR_RETURN(model);
  auto backend = make_backend("cpu", test::embedded_context());
  const int batch = 2, height = 96, width = 128;  // rectangular, small enough for the emulator
  const auto input = random_uniform(size_t(batch) * 3 * height * width, 0.0f, 1.0f, 20261130);
  test::compare_with_reference(*model, *backend, input, batch, height, width);
}

TEST_CASE(
    "tensor-core (tf32 / fp16 / bf16) kernel networks on the cpu emulator match the reference forward layer "
    "by layer",
    "[network]") {
  LAB_SHARED_YOLO26N_OR_RETURN(model);
  auto backend = make_backend("cpu", test::embedded_context());
  const int batch = 2, height = 96, width = 128;
  const auto input = random_uniform(size_t(batch) * 3 * height * width, 0.0f, 1.0f, 20261130);
  for (Precision precision : {Precision::Tf32, Precision::Fp16, Precision::Bf16}) {
    CAPTURE(precision_name(precision));
    test::compare_with_reference(*model, *backend, input, batch, height, width, precision);
  }
}

TEST_CASE("kernel network on the GPU matches the reference forward at 640x640 at every precision",
          "[network][gpu]") {
  LAB_REQUIRE_GPU_OR_SKIP();
  LAB_SHARED_YOLO26N_OR_RETURN(model);
  auto backend = make_backend("cuda", test::embedded_context());
  const std::vector<float> bus = test::bus640_input();
  for (Precision precision : kPrecisions) {
    CAPTURE(precision_name(precision));
    test::compare_with_reference(*model, *backend, bus, 1, 640, 640, precision);
  }
  // Batch 3 of random images at a rectangular size exercises the batched plan on the device.
  const auto input = random_uniform(size_t(3) * 3 * 320 * 224, 0.0f, 1.0f, 7);
  test::compare_with_reference(*model, *backend, input, 3, 320, 224);
}

namespace {

// yolo26n on a backend ("cpu", "cuda") behind a CountingBackend; null (with a warning) without the shared
// model.
struct CountedNetwork {
  explicit CountedNetwork(const std::string& backend_name)
      : inner(make_backend(backend_name, test::embedded_context())), backend(*inner) {}
  std::unique_ptr<Backend> inner;
  test::CountingBackend backend;
  std::unique_ptr<Network> network;
};
std::unique_ptr<CountedNetwork> counted_network(const std::string& backend_name) {
  LAB_SHARED_YOLO26N_OR_RETURN(model, nullptr);
  auto counted = std::make_unique<CountedNetwork>(backend_name);
  counted->network = make_kernel_network(*model, counted->backend);
  return counted;
}

// prepare() captures the plan before any forward, and a forward over two images apart in the backend's
// staging memory (page-locked on cuda) uploads each once and gives the rows of the forward over the batch.
void check_forward_images(const std::string& backend_name) {
  const auto counted = counted_network(backend_name);
  if (!counted) return;
  test::CountingBackend& backend = counted->backend;
  Network* network = counted->network.get();
  network->prepare(2, 64, 96);
  CHECK(backend.captures == 1);  // the plan's graph, before any forward
  const auto batch = random_uniform(size_t(2) * 3 * 64 * 96, 0.0f, 1.0f, 11);
  // The two images apart, as staging slots hold them.
  const size_t per_image = size_t(3) * 64 * 96;
  HostBuffer slots = backend.alloc_host(2 * per_image * sizeof(float) + 64);
  float* second = slots.as<float>() + per_image + 16;
  std::copy_n(batch.data(), per_image, slots.as<float>());
  std::copy_n(batch.data() + per_image, per_image, second);
  const size_t uploads = backend.uploads;
  network->forward_images({slots.as<float>(), second}, 64, 96);
  CHECK(backend.uploads - uploads == 2);  // each image straight into the batch input
  CHECK(backend.captures == 1);           // the prepared plan ran
  const std::vector<float> separate = network->detections();
  network->forward(batch.data(), 2, 64, 96);
  CHECK(network->detections() == separate);
}

}  // namespace

TEST_CASE("kernel network uploads the decode's anchor grid once per image size, not once per batch plan",
          "[network]") {
  const auto counted = counted_network("cpu");
  if (!counted) return;
  test::CountingBackend& backend = counted->backend;
  Network* network = counted->network.get();
  auto uploads_of_forward = [&](int batch, int height, int width) {
    const auto input = random_uniform(size_t(batch) * 3 * height * width, 0.0f, 1.0f, 5);
    const size_t before = backend.uploads;
    network->forward(input.data(), batch, height, width);
    return backend.uploads - before;
  };
  // The first forward also uploads every conv's weights (the ops are made then).
  CHECK(uploads_of_forward(1, 64, 96) > 1 + 3);
  // Each later forward uploads its input once; the first at an image size also the anchor grid's x, y and
  // stride.
  CHECK(uploads_of_forward(1, 64, 64) == 1 + 3);
  CHECK(uploads_of_forward(2, 64, 64) == 1);  // a new plan (batch 2) at the same size: no new grid
  CHECK(uploads_of_forward(1, 64, 64) == 1);
  CHECK(uploads_of_forward(2, 64, 96) == 1);
}

TEST_CASE("a kernel network's forward over separate images equals its forward over the batch, and prepare "
          "builds the plan before it",
          "[network]") {
  check_forward_images("cpu");
}

TEST_CASE("on the GPU, a forward over page-locked staging slots equals the forward over the batch, and prepare "
          "captures the plan before it",
          "[network][gpu]") {
  LAB_REQUIRE_GPU_OR_SKIP();
  check_forward_images("cuda");
}

TEST_CASE("a kernel network names only the nn kernel instances its convs use", "[network]") {
  LAB_SHARED_YOLO26N_OR_RETURN(model);
  const NnKernelNames all = all_nn_kernel_names();
  auto has_prefix = [](const std::vector<std::string>& names, const std::string& prefix) {
    return std::any_of(names.begin(), names.end(), [&](const std::string& n) { return n.rfind(prefix, 0) == 0; });
  };
  const NnKernelNames fp32 = NetworkOps::kernel_names(*model, Precision::Fp32);
  CHECK(fp32.mma.empty());  // the fp16/bf16 module is never compiled
  CHECK_FALSE(has_prefix(fp32.nn, "conv2d_tf32<"));
  CHECK(has_prefix(fp32.nn, "conv2d_tiled<3, "));
  CHECK(has_prefix(fp32.nn, "conv2d_depthwise<"));
  CHECK(fp32.nn.size() < all.nn.size());
  const NnKernelNames fp16 = NetworkOps::kernel_names(*model, Precision::Fp16);
  CHECK(has_prefix(fp16.mma, "conv2d_mma<" + half_type_template_arg(HalfType::f16) + ", "));
  CHECK_FALSE(has_prefix(fp16.mma, "conv2d_mma<" + half_type_template_arg(HalfType::bf16) + ", "));
  CHECK(fp16.mma.size() < all.mma.size() / 2 + 1);
}

TEST_CASE("a kernel network's first forward compiles every module it needs ahead, side by side", "[network]") {
  LAB_SHARED_YOLO26N_OR_RETURN(model);
  // An empty cache: any module the ops compile that Backend::precompile did not is a cache miss.
  test::ScratchDir cache("network-precompile");
  auto cpu = make_backend("cpu", test::make_context(KernelTree::embedded(), cache.path));
  test::CountingBackend backend(*cpu);
  auto network = make_kernel_network(*model, backend);
  const auto input = random_uniform(size_t(3) * 64 * 96, 0.0f, 1.0f, 9);
  network->forward(input.data(), 1, 64, 96);
  CHECK(backend.compile_misses == 0);
  CHECK(std::distance(std::filesystem::directory_iterator(cache.path), {}) > 0);  // something was compiled
}

// The inference plans run the head's levels on lanes (shape_plan, nhwc_plan): through a backend that runs the
// lanes' launches only when they join (the latest order streams allow), and through one that interleaves them
// with the main lane's, both layouts give the plain backend's detections bit for bit, with launches on side
// lanes and nothing left pending.
TEST_CASE("a kernel network gives the same detections with its lanes' launches delayed or interleaved",
          "[network]") {
  LAB_SHARED_YOLO26N_OR_RETURN(model);
  using Schedule = test::DelayedLanesBackend::Schedule;
  const Schedule schedule = GENERATE(Schedule::Latest, Schedule::Interleaved);
  auto cpu = make_backend("cpu", test::embedded_context());
  const std::vector<float> input = random_uniform(size_t(2) * 3 * 64 * 96, 0.0f, 1.0f, 12);
  for (LayoutChoice layout : {LayoutChoice::Nchw, LayoutChoice::Nhwc}) {
    INFO(layout_name(layout == LayoutChoice::Nchw ? ActivationLayout::Nchw : ActivationLayout::Nhwc));
    const auto plain = make_kernel_network(*model, *cpu, Precision::Fp32, layout);
    plain->forward(input.data(), 2, 64, 96);
    test::DelayedLanesBackend delayed(*cpu, schedule);
    const auto lanes = make_kernel_network(*model, delayed, Precision::Fp32, layout);
    lanes->forward(input.data(), 2, 64, 96);
    CHECK(delayed.pending() == 0);
    CHECK(delayed.forks > 0);
    CHECK(std::any_of(delayed.lanes_of.begin(), delayed.lanes_of.end(),
                      [](const auto& kernel_lanes) { return *kernel_lanes.second.rbegin() > 0; }));
    CHECK(lanes->detections() == plain->detections());
  }
}
