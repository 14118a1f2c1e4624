// The comparison of a kernel network with the CPU reference forward, tensor by tensor, then its detections,
// its graph replay and its layer-by-layer run (tests/network_compare.hpp).
#include "tests/network_compare.hpp"

#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdio>

#include "tests/network_test_support.hpp"

namespace lab::test {

namespace {

constexpr NetworkTolerance kFp32{1e-4, 1e-4f, 0.02f};
// TF32 rounds every dense conv's inputs and weights to 10 mantissa bits (rel_l2 ~2e-4 per conv, measured in
// the conv2d tests), and the errors add up along the network: measured on the cpu test of test_kernel_network.cpp, the worst
// tensor is layer04 at rel_l2 1.3e-3 (the attention maps 9.4e-4). 1e-2 leaves about eight times that for
// other inputs, while a wrong conv (a dropped chunk: >= 8e-2 on that layer, more downstream) still fails.
// Scores and boxes follow the same relative error: 2e-2 and one input pixel.
constexpr NetworkTolerance kTf32{1e-2, 2e-2f, 1.0f};
// fp16 operands carry the same 10 mantissa bits as TF32: the same bar (measured worst tensor 1.3e-3, as
// TF32). bf16 keeps 7 bits, 8x the rounding step: measured worst tensor 1.4e-2 on that cpu test. 5e-2
// leaves 3.5x that (8x, as for TF32, would come near the 0.11 of a conv that drops one 32-row chunk); scores
// and boxes get five and four times TF32's bar. Below a few percent the ranking is a near-tie among thousands
// of background anchors: at 640x640 on the bus image the logits' ~1 % error swapped the reference's row 149
// (score 7e-4) for another anchor, so bf16 compares the detections from a score of 0.05 up (the bus image's
// five objects score 0.26..0.92).
constexpr NetworkTolerance kBf16{5e-2, 1e-1f, 4.0f, 0.05f};

}  // namespace

NetworkTolerance network_tolerance(Precision p) {
  if (p == Precision::Fp32) return kFp32;
  return p == Precision::Bf16 ? kBf16 : kTf32;
}

std::pair<std::string, double> compare_tensors(Network& reference, Network& kernels, double bar) {
  const std::vector<std::string> names = kernels.tensor_names();
  double worst = 0;
  std::string worst_name;
  for (const std::string& name : reference.tensor_names()) {
    // The kernel executor runs inference only: it skips the one-to-many head the reference also computes.
    if (name == "output" || name.rfind("head.one2many.", 0) == 0) continue;
    CAPTURE(name);
    REQUIRE(std::find(names.begin(), names.end(), name) != names.end());
    const NamedTensor want = reference.tensor(name), got = kernels.tensor(name);
    REQUIRE(got.shape == want.shape);
    CHECK(test::non_finite_count(got.values) == 0);
    const double rel = test::relative_l2(got.values, want.values);
    CAPTURE(rel);
    CHECK(rel < bar);
    if (rel > worst) worst = rel, worst_name = name;
  }
  return {worst_name, worst};
}

void compare_with_reference(const Yolo26Model& model, Backend& backend, const std::vector<float>& input,
                            int batch, int height, int width, Precision precision, LayoutChoice layout,
                            const NetworkTolerance& tol) {
  auto reference = make_reference_network(model);
  reference->forward(input.data(), batch, height, width);
  auto kernels = make_kernel_network(model, backend, precision, layout);
  REQUIRE(kernels->activation_layout() == (layout == LayoutChoice::Nhwc ? "nhwc" : "nchw"));
  kernels->forward(input.data(), batch, height, width);
  const auto [worst_name, worst] = compare_tensors(*reference, *kernels, tol.layer_rel_l2);
  // The measured error of each precision (docs/detect.md quotes it).
  std::printf("kernel network %s %s, batch %d, %dx%d: worst tensor %s rel_l2 %.2e (bar %.0e)\n",
              precision_name(precision).c_str(), kernels->activation_layout().c_str(), batch, height, width,
              worst_name.c_str(), worst,
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

void compare_with_reference(const Yolo26Model& model, Backend& backend, const std::vector<float>& input,
                            int batch, int height, int width, Precision precision) {
  compare_with_reference(model, backend, input, batch, height, width, precision, LayoutChoice::Nchw,
                         network_tolerance(precision));
}

}  // namespace lab::test
