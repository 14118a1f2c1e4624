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
#include "tests/network_test_support.hpp"
#include "pipeline/executor/network_ops.hpp"
#include "pipeline/network.hpp"
#include "pipeline/safetensors.hpp"
#include "nvrtc_runtime/runtime_context.hpp"
#include "tests/test_helpers.hpp"

using namespace lab;

namespace {

struct NetworkTolerance {
  double layer_rel_l2;       // every tensor against the reference
  float score_tol, box_tol;  // detections above two thirds of K: |score diff|, |coordinate diff| (pixels)
  float score_floor = 0.0f;  // ... and above this score
};
constexpr NetworkTolerance kFp32{1e-4, 1e-4f, 0.02f};
// TF32 rounds every dense conv's inputs and weights to 10 mantissa bits (rel_l2 ~2e-4 per conv, measured in
// the conv2d tests), and the errors add up along the network: measured on the cpu test below, the worst
// tensor is layer04 at rel_l2 1.3e-3 (the attention maps 9.4e-4). 1e-2 leaves about eight times that for
// other inputs, while a wrong conv (a dropped chunk: >= 8e-2 on that layer, more downstream) still fails.
// Scores and boxes follow the same relative error: 2e-2 and one input pixel.
constexpr NetworkTolerance kTf32{1e-2, 2e-2f, 1.0f};
// fp16 operands carry the same 10 mantissa bits as TF32: the same bar (measured worst tensor 1.3e-3, as
// TF32). bf16 keeps 7 bits, 8x the rounding step: measured worst tensor 1.4e-2 on the cpu test below. 5e-2
// leaves 3.5x that (8x, as for TF32, would come near the 0.11 of a conv that drops one 32-row chunk); scores
// and boxes get five and four times TF32's bar. Below a few percent the ranking is a near-tie among thousands
// of background anchors: at 640x640 on the bus image the logits' ~1 % error swapped the reference's row 149
// (score 7e-4) for another anchor, so bf16 compares the detections from a score of 0.05 up (the bus image's
// five objects score 0.26..0.92).
constexpr NetworkTolerance kBf16{5e-2, 1e-1f, 4.0f, 0.05f};

NetworkTolerance network_tolerance(Precision p) {
  if (p == Precision::Fp32) return kFp32;
  return p == Precision::Bf16 ? kBf16 : kTf32;
}

void compare_with_reference(const Yolo26Model& model, Backend& backend, const std::vector<float>& input,
                            int batch, int height, int width, Precision precision = Precision::Fp32) {
  const NetworkTolerance tol = network_tolerance(precision);
  auto reference = make_reference_network(model);
  reference->forward(input.data(), batch, height, width);
  auto kernels = make_kernel_network(model, backend, precision);
  kernels->forward(input.data(), batch, height, width);

  const std::vector<std::string> names = kernels->tensor_names();
  double worst = 0;
  std::string worst_name;
  for (const std::string& name : reference->tensor_names()) {
    // The kernel executor runs inference only: it skips the one-to-many head the reference also computes.
    if (name == "output" || name.rfind("head.one2many.", 0) == 0) continue;
    CAPTURE(name);
    REQUIRE(std::find(names.begin(), names.end(), name) != names.end());
    const NamedTensor want = reference->tensor(name), got = kernels->tensor(name);
    REQUIRE(got.shape == want.shape);
    CHECK(test::non_finite_count(got.values) == 0);
    const double rel = test::relative_l2(got.values, want.values);
    CAPTURE(rel);
    CHECK(rel < tol.layer_rel_l2);
    if (rel > worst) worst = rel, worst_name = name;
  }
  // The measured error of each precision (docs/detect.md quotes it).
  std::printf("kernel network %s, batch %d, %dx%d: worst tensor %s rel_l2 %.2e (bar %.0e)\n",
              precision_name(precision).c_str(), batch, height, width, worst_name.c_str(), worst,
              tol.layer_rel_l2);

  // Detections: every row above the score of the reference's row at two thirds of K matches (class, score,
  // box); lower rows may swap places with near-equal scores across the K boundary.
  const std::vector<float> want = reference->detections(), got = kernels->detections();
  REQUIRE(got.size() == want.size());
  const size_t k = want.size() / size_t(batch) / 6;
  for (int b = 0; b < batch; ++b) {
    const auto first = want.begin() + long(b * k * 6), last = first + long(k * 6);
    const std::vector<float> want_b(first, last);
    const std::vector<float> got_b(got.begin() + long(b * k * 6), got.begin() + long((b + 1) * k * 6));
    const float min_score = std::max(want_b[(2 * k / 3) * 6 + 4], tol.score_floor);
    CAPTURE(b, min_score);
    CHECK(test::match_detections(got_b, want_b, min_score, tol.score_tol, tol.box_tol) == "");
  }

  // Replaying the recorded graph and running layer by layer with timing give the same bits.
  kernels->forward(input.data(), batch, height, width);
  CHECK(kernels->detections() == got);
  kernels->set_layer_timing(true);
  kernels->forward(input.data(), batch, height, width);
  CHECK(kernels->detections() == got);
  // Every layer that launches work has a time (the Concat layers launch nothing: their inputs write in
  // place).
  std::vector<std::string> timed;
  for (const LayerTime& t : kernels->layer_times()) timed.push_back(t.name);
  for (const char* name : {"layer00", "layer09", "layer10", "layer22", "layer23", "decode", "topk"})
    CHECK(std::find(timed.begin(), timed.end(), name) != timed.end());
}

}  // namespace

TEST_CASE("kernel network on the cpu emulator matches the reference forward layer by layer", "[network]") {
  const Yolo26Model* model = test::shared_yolo26n();
  if (!model) {
    WARN("skipped: ../shared/assets/models/yolo26n.pt is absent");
    return;
  }
  auto backend = make_backend("cpu", test::embedded_context());
  const int batch = 2, height = 96, width = 128;  // rectangular, small enough for the emulator
  const auto input = random_uniform(size_t(batch) * 3 * height * width, 0.0f, 1.0f, 20261130);
  compare_with_reference(*model, *backend, input, batch, height, width);
}

TEST_CASE(
    "tensor-core (tf32 / fp16 / bf16) kernel networks on the cpu emulator match the reference forward layer "
    "by layer",
    "[network]") {
  const Yolo26Model* model = test::shared_yolo26n();
  if (!model) {
    WARN("skipped: ../shared/assets/models/yolo26n.pt is absent");
    return;
  }
  auto backend = make_backend("cpu", test::embedded_context());
  const int batch = 2, height = 96, width = 128;
  const auto input = random_uniform(size_t(batch) * 3 * height * width, 0.0f, 1.0f, 20261130);
  for (Precision precision : {Precision::Tf32, Precision::Fp16, Precision::Bf16}) {
    CAPTURE(precision_name(precision));
    compare_with_reference(*model, *backend, input, batch, height, width, precision);
  }
}

TEST_CASE("kernel network on the GPU matches the reference forward at 640x640 at every precision",
          "[network][gpu]") {
  LAB_REQUIRE_GPU_OR_SKIP();
  const Yolo26Model* model = test::shared_yolo26n();
  if (!model) {
    WARN("skipped: ../shared/assets/models/yolo26n.pt is absent");
    return;
  }
  auto backend = make_backend("cuda", test::embedded_context());
  const auto golden = SafetensorsFile::load(test::assets_dir() / "goldens" / "bus640_golden_0.safetensors");
  const std::vector<float> bus = golden.floats("input", {1, 3, 640, 640});
  for (Precision precision : kPrecisions) {
    CAPTURE(precision_name(precision));
    compare_with_reference(*model, *backend, bus, 1, 640, 640, precision);
  }
  // Batch 3 of random images at a rectangular size exercises the batched plan on the device.
  const auto input = random_uniform(size_t(3) * 3 * 320 * 224, 0.0f, 1.0f, 7);
  compare_with_reference(*model, *backend, input, 3, 320, 224);
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
  const Yolo26Model* model = test::shared_yolo26n();
  if (!model) {
    WARN("skipped: ../shared/assets/models/yolo26n.pt is absent");
    return nullptr;
  }
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
  const Yolo26Model* model = test::shared_yolo26n();
  if (!model) {
    WARN("skipped: ../shared/assets/models/yolo26n.pt is absent");
    return;
  }
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
  const Yolo26Model* model = test::shared_yolo26n();
  if (!model) {
    WARN("skipped: ../shared/assets/models/yolo26n.pt is absent");
    return;
  }
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
