// Conv2d backward: the float64 reference backward proven by central finite differences of the float64
// forward reference (conv2d_reference) on tiny shapes; then the dgrad / wgrad runners (silu backward with its
// bias sums, input gradient, weight and bias gradient kernels) against that reference on the cpu backend over
// yolo26n's conv shapes, twice per instance with the outputs re-poisoned, and on cuda in the [gpu] twin.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>

#include "kernels/compare.hpp"
#include "kernels/nn/conv2d_backward_op.hpp"
#include "kernels/nn/conv2d_backward_reference.hpp"
#include "kernels/nn/conv2d_inputs.hpp"
#include "kernels/nn/conv2d_reference.hpp"
#include "kernels/nn/plane_backward_ops.hpp"
#include "kernels/runner.hpp"
#include "nvrtc_runtime/errors.hpp"
#include "tests/sm90_resources.hpp"
#include "tests/test_helpers.hpp"

using namespace lab;

namespace {

struct Problem {
  Conv2dShape shape;
  int batch, h, w;
};

// sum over outputs of grad_out * forward: its gradient is what conv2d_backward_reference computes.
double weighted_loss(const Problem& p, const std::vector<float>& in, const std::vector<float>& weight,
                     const std::vector<float>& bias, const std::vector<float>& grad_out) {
  const std::vector<double> out = conv2d_reference(p.shape, p.batch, p.h, p.w, in, weight, bias, {});
  double loss = 0;
  for (size_t i = 0; i < out.size(); ++i) loss += out[i] * grad_out[i];
  return loss;
}

// Central differences of weighted_loss over every element of `values` (one of the three inputs, perturbed in
// place by +-h as float32; the step is the difference of the two floats actually used).
std::vector<double> finite_differences(std::vector<float>& values, const std::function<double()>& loss) {
  constexpr float h = 1.0f / 512;
  std::vector<double> grad(values.size());
  for (size_t i = 0; i < values.size(); ++i) {
    const float original = values[i], plus = original + h, minus = original - h;
    values[i] = plus;
    const double loss_plus = loss();
    values[i] = minus;
    const double loss_minus = loss();
    values[i] = original;
    grad[i] = (loss_plus - loss_minus) / (double(plus) - double(minus));
  }
  return grad;
}

// The central difference's error is h^2 / 6 * f''' (~1e-6 here: O(1) values, third derivatives of SiLU
// below 0.5); a wrong tap, a missing silu' factor or a dropped group is off by O(0.1).
void expect_matches_differences(const std::vector<double>& analytic, const std::vector<double>& numeric,
                                const char* what) {
  REQUIRE(analytic.size() == numeric.size());
  for (size_t i = 0; i < analytic.size(); ++i) {
    INFO(what << "[" << i << "] analytic " << analytic[i] << " numeric " << numeric[i]);
    CHECK(std::abs(analytic[i] - numeric[i]) <= 2e-5 * (1.0 + std::abs(numeric[i])));
  }
}

}  // namespace

TEST_CASE("the conv2d backward reference matches finite differences of the forward reference",
          "[conv2d_bwd]") {
  const Problem problems[] = {
      {{4, 6, 3, 1, 1, true}, 2, 5, 4},    // k3 s1 with SiLU, batch 2
      {{3, 4, 3, 2, 1, true}, 1, 7, 5},    // k3 s2 at odd sizes (the stem / downsample)
      {{4, 4, 3, 2, 4, true}, 1, 6, 7},    // depthwise k3 s2
      {{6, 4, 1, 1, 2, false}, 1, 3, 4},   // k1, two groups, no SiLU
      {{2, 3, 5, 1, 1, true}, 1, 4, 6},    // k5 wider than the input
  };
  for (const Problem& p : problems) {
    const Conv2dShape& s = p.shape;
    INFO("c_in " << s.c_in << " c_out " << s.c_out << " k" << s.kernel << " s" << s.stride << " g" << s.groups
                 << " silu " << s.silu << " at " << p.h << "x" << p.w);
    std::vector<float> in = random_uniform(size_t(p.batch) * s.c_in * p.h * p.w, -1.0f, 1.0f, 1);
    std::vector<float> weight = random_uniform(size_t(s.weight_count()), -0.7f, 0.7f, 2);
    std::vector<float> bias = random_uniform(size_t(s.c_out), -0.5f, 0.5f, 3);
    const std::vector<float> grad_out =
        random_uniform(size_t(p.batch) * s.c_out * s.out_size(p.h) * s.out_size(p.w), -1.0f, 1.0f, 4);
    const auto loss = [&] { return weighted_loss(p, in, weight, bias, grad_out); };
    const Conv2dGradients g = conv2d_backward_reference(s, p.batch, p.h, p.w, in, weight, bias, grad_out);
    expect_matches_differences(g.grad_in, finite_differences(in, loss), "grad_in");
    expect_matches_differences(g.grad_weight, finite_differences(weight, loss), "grad_weight");
    expect_matches_differences(g.grad_bias, finite_differences(bias, loss), "grad_bias");
  }
}

namespace {

using Case = std::pair<std::string, Params>;  // variant, parameters

// yolo26n's conv classes at small sizes: 1x1 (C3k2 cv1/cv2, attention qkv/proj without SiLU), 3x3 s1
// (Bottleneck), 3x3 s2 (stem and downsamples, odd sizes), depthwise 3x3 (the detect head's DWConv, s1 and
// s2), a grouped conv and a 7x7 s3 for v1's generality; each with "auto" where it picks differently.
const std::vector<Case>& backward_cases() {
  static const std::vector<Case> cases = {
      {"v2_tiled", {{"B", "2"}, {"C_IN", "24"}, {"C_OUT", "40"}, {"H", "13"}, {"W", "11"}, {"K", "1"}}},
      {"v2_tiled", {{"C_IN", "16"}, {"C_OUT", "32"}, {"H", "12"}, {"W", "10"}, {"K", "3"}}},
      {"v2_tiled", {{"C_IN", "3"}, {"C_OUT", "16"}, {"H", "20"}, {"W", "17"}, {"K", "3"}, {"STRIDE", "2"}}},
      {"v2_tiled", {{"C_IN", "32"}, {"C_OUT", "72"}, {"H", "15"}, {"W", "9"}, {"K", "3"}, {"STRIDE", "2"}}},
      {"v2_tiled", {{"C_IN", "70"}, {"C_OUT", "36"}, {"H", "7"}, {"W", "5"}, {"K", "1"}, {"SILU", "false"}}},
      {"v2_tiled", {{"C_IN", "6"}, {"C_OUT", "5"}, {"H", "8"}, {"W", "7"}, {"K", "5"}}},
      // Enough (b, pixel) items for the weight gradient's split-K (checked to split below).
      {"v2_tiled", {{"B", "2"}, {"C_IN", "8"}, {"C_OUT", "16"}, {"H", "32"}, {"W", "30"}, {"K", "3"}}},
      {"v1_direct", {{"C_IN", "16"}, {"C_OUT", "24"}, {"H", "9"}, {"W", "11"}, {"K", "3"}}},
      // Stride-phase classes of the input gradient: 1x1 stride 2 (the odd rows and columns get no tap:
      // zeros), 5x5 stride 2 (1 to 9 taps per class) on classes of unequal sizes.
      {"v2_tiled",
       {{"B", "2"}, {"C_IN", "12"}, {"C_OUT", "20"}, {"H", "9"}, {"W", "8"}, {"K", "1"}, {"STRIDE", "2"}}},
      {"v2_tiled", {{"C_IN", "8"}, {"C_OUT", "12"}, {"H", "11"}, {"W", "10"}, {"K", "5"}, {"STRIDE", "2"}}},
      {"v4_bf16",
       {{"B", "2"}, {"C_IN", "16"}, {"C_OUT", "24"}, {"H", "7"}, {"W", "12"}, {"K", "3"}, {"STRIDE", "2"}}},
      // The 16-bit GEMMs (their own tolerances): two channel tiles at stride 2, split-K, 1x1 and 5x5.
      {"v3_fp16", {{"C_IN", "32"}, {"C_OUT", "72"}, {"H", "15"}, {"W", "9"}, {"K", "3"}, {"STRIDE", "2"}}},
      {"v3_fp16", {{"B", "2"}, {"C_IN", "8"}, {"C_OUT", "16"}, {"H", "32"}, {"W", "30"}, {"K", "3"}}},
      {"v4_bf16", {{"B", "2"}, {"C_IN", "24"}, {"C_OUT", "40"}, {"H", "13"}, {"W", "11"}, {"K", "1"}}},
      {"v4_bf16", {{"C_IN", "6"}, {"C_OUT", "5"}, {"H", "8"}, {"W", "7"}, {"K", "5"}, {"SILU", "false"}}},
      // The pipelined GEMMs at odd sizes on every variant: stride 2 with a partial channel tile (C_IN 70) and
      // a partial last chunk of each tap (C_OUT 37 / 40 / 44, not a multiple of 16 or 32), 5x5 stride 2, and
      // weight-gradient splits whose item count is no multiple of the 32-item granule (3 x 31 x 29).
      {"v2_tiled", {{"C_IN", "70"}, {"C_OUT", "37"}, {"H", "13"}, {"W", "11"}, {"K", "3"}, {"STRIDE", "2"}}},
      {"v3_fp16", {{"C_IN", "70"}, {"C_OUT", "40"}, {"H", "13"}, {"W", "11"}, {"K", "3"}, {"STRIDE", "2"}}},
      {"v4_bf16", {{"C_IN", "20"}, {"C_OUT", "44"}, {"H", "11"}, {"W", "9"}, {"K", "5"}, {"STRIDE", "2"}}},
      {"v3_fp16", {{"C_IN", "12"}, {"C_OUT", "20"}, {"H", "9"}, {"W", "8"}, {"K", "1"}, {"STRIDE", "2"}}},
      {"v2_tiled", {{"B", "3"}, {"C_IN", "5"}, {"C_OUT", "24"}, {"H", "31"}, {"W", "29"}, {"K", "3"}}},
      {"v4_bf16", {{"B", "3"}, {"C_IN", "5"}, {"C_OUT", "24"}, {"H", "31"}, {"W", "29"}, {"K", "3"}}},
      // conv2d_wgrad_narrow (the 16-bit weight gradient at 3x3, C_OUT <= 16, C_IN * 9 <= 144), NT 4 / 9 / 18:
      // the stem's 3 -> 16 at stride 2 on odd sizes with splits, C_OUT 8 (half of A's rows zero) with ragged
      // splits, and planes narrower than a warp's 16-item step (items crossing rows and images).
      {"v3_fp16",
       {{"B", "2"}, {"C_IN", "3"}, {"C_OUT", "16"}, {"H", "41"}, {"W", "37"}, {"K", "3"}, {"STRIDE", "2"}}},
      {"v4_bf16", {{"B", "3"}, {"C_IN", "16"}, {"C_OUT", "8"}, {"H", "31"}, {"W", "29"}, {"K", "3"}}},
      {"v3_fp16", {{"B", "3"}, {"C_IN", "7"}, {"C_OUT", "13"}, {"H", "5"}, {"W", "3"}, {"K", "3"}}},
      {"auto", {{"C_IN", "48"}, {"C_OUT", "48"}, {"GROUPS", "48"}, {"H", "11"}, {"W", "13"}, {"K", "3"}}},
      // Without SiLU the weight-gradient launch sums the bias gradient too (the GEMMs' and the narrow
      // kernel's last column of CTAs, the depthwise kernel beside its taps): split rows reduced with the
      // weights', ragged splits, two channel tiles of which one partial, the 1x1 vector staging, the narrow
      // kernel with splits, depthwise with splits.
      {"v3_fp16",
       {{"B", "2"}, {"C_IN", "8"}, {"C_OUT", "16"}, {"H", "32"}, {"W", "30"}, {"K", "3"}, {"SILU", "false"}}},
      {"v2_tiled",
       {{"B", "3"}, {"C_IN", "5"}, {"C_OUT", "24"}, {"H", "31"}, {"W", "29"}, {"K", "3"}, {"SILU", "false"}}},
      {"v3_fp16",
       {{"C_IN", "32"},
        {"C_OUT", "72"},
        {"H", "15"},
        {"W", "9"},
        {"K", "3"},
        {"STRIDE", "2"},
        {"SILU", "false"}}},
      {"v4_bf16",
       {{"B", "2"},
        {"C_IN", "24"},
        {"C_OUT", "40"},
        {"H", "16"},
        {"W", "12"},
        {"K", "1"},
        {"SILU", "false"}}},
      {"v3_fp16",
       {{"B", "2"},
        {"C_IN", "3"},
        {"C_OUT", "16"},
        {"H", "41"},
        {"W", "37"},
        {"K", "3"},
        {"STRIDE", "2"},
        {"SILU", "false"}}},
      {"v4_bf16",
       {{"B", "3"}, {"C_IN", "16"}, {"C_OUT", "8"}, {"H", "31"}, {"W", "29"}, {"K", "3"}, {"SILU", "false"}}},
      {"v5_depthwise",
       {{"B", "3"},
        {"C_IN", "8"},
        {"C_OUT", "8"},
        {"GROUPS", "8"},
        {"H", "31"},
        {"W", "29"},
        {"K", "3"},
        {"SILU", "false"}}},
      // The 1x1 vector staging summing db itself, with splits (16-bit), and float32 at TM 16, which leaves
      // it to its bias CTAs.
      {"v3_fp16",
       {{"B", "2"},
        {"C_IN", "16"},
        {"C_OUT", "24"},
        {"H", "32"},
        {"W", "32"},
        {"K", "1"},
        {"SILU", "false"}}},
      {"v2_tiled",
       {{"B", "2"}, {"C_IN", "8"}, {"C_OUT", "12"}, {"H", "16"}, {"W", "16"}, {"K", "1"}, {"SILU", "false"}}},
      {"v1_direct",
       {{"B", "2"},
        {"C_IN", "8"},
        {"C_OUT", "8"},
        {"GROUPS", "8"},
        {"H", "9"},
        {"W", "6"},
        {"K", "3"},
        {"STRIDE", "2"}}},
      {"v1_direct", {{"C_IN", "12"}, {"C_OUT", "9"}, {"GROUPS", "3"}, {"H", "7"}, {"W", "8"}, {"K", "3"}}},
      {"v1_direct", {{"C_IN", "6"}, {"C_OUT", "4"}, {"H", "11"}, {"W", "9"}, {"K", "7"}, {"STRIDE", "3"}}},
      // The depthwise weight gradient: batch 1 and 2, stride 1 and 2, K 3 / 5 / 7, planes narrower than a
      // warp (a thread's items cross rows and images), ragged splits at stride 1 (3 x 31 x 29 items: 5
      // splits, the last 521 items) and stride 2 (4 x 20 x 19: 3 splits, the last 496).
      {"v5_depthwise",
       {{"C_IN", "24"}, {"C_OUT", "24"}, {"GROUPS", "24"}, {"H", "13"}, {"W", "11"}, {"K", "3"}}},
      {"v5_depthwise",
       {{"B", "2"},
        {"C_IN", "16"},
        {"C_OUT", "16"},
        {"GROUPS", "16"},
        {"H", "15"},
        {"W", "9"},
        {"K", "3"},
        {"STRIDE", "2"}}},
      {"v5_depthwise",
       {{"B", "3"}, {"C_IN", "8"}, {"C_OUT", "8"}, {"GROUPS", "8"}, {"H", "31"}, {"W", "29"}, {"K", "3"}}},
      {"v5_depthwise",
       {{"B", "4"},
        {"C_IN", "8"},
        {"C_OUT", "8"},
        {"GROUPS", "8"},
        {"H", "40"},
        {"W", "37"},
        {"K", "3"},
        {"STRIDE", "2"}}},
      {"v5_depthwise",
       {{"B", "2"},
        {"C_IN", "6"},
        {"C_OUT", "6"},
        {"GROUPS", "6"},
        {"H", "12"},
        {"W", "7"},
        {"K", "5"},
        {"STRIDE", "2"},
        {"SILU", "false"}}},
      {"v5_depthwise", {{"C_IN", "4"}, {"C_OUT", "4"}, {"GROUPS", "4"}, {"H", "9"}, {"W", "10"}, {"K", "7"}}},
      // A weight gradient of one tile split 130 ways (4 x 128 x 130 items, 16 granules a split): the 1x1
      // weight gradients of a batch-32 iteration split into hundreds, the other cases here into a few.
      {"v2_tiled", {{"B", "4"}, {"C_IN", "8"}, {"C_OUT", "8"}, {"H", "128"}, {"W", "130"}, {"K", "1"}}},
  };
  return cases;
}

// Two launches per instance, the outputs re-poisoned before each: every element must be written again.
void run_backward_runner(Backend& backend, const std::string& kernel, const std::string& variant,
                         const Params& given) {
  const Runner& r = Registry::instance().get(kernel);
  const Params p = resolve_params(r, given);
  auto inst = r.instantiate(backend, resolve_variant(r, variant), p, 5);
  for (int round = 0; round < 2; ++round) {
    inst->poison();
    inst->launch();
    for (const OutputCheck& c : inst->check(std::nullopt)) {
      INFO(backend.name() << " " << kernel << "/" << variant << " C_IN " << p.at("C_IN") << " C_OUT "
                          << p.at("C_OUT") << " K " << p.at("K") << " S " << p.at("STRIDE") << " G "
                          << p.at("GROUPS") << " " << c.output << " rel_l2=" << c.metrics.rel_l2
                          << " max_abs=" << c.metrics.max_abs << " non-finite=" << c.metrics.non_finite);
      CHECK(c.pass);
    }
  }
}

void run_backward_runners(const std::string& backend_name, const std::string& kernel) {
  auto backend = make_backend(backend_name, test::embedded_context());
  for (const auto& [variant, p] : backward_cases()) run_backward_runner(*backend, kernel, variant, p);
}

}  // namespace

TEST_CASE("conv2d_dgrad matches the reference backward on the cpu backend", "[conv2d_bwd]") {
  run_backward_runners("cpu", "conv2d_dgrad");
}

TEST_CASE("conv2d_wgrad matches the reference backward on the cpu backend", "[conv2d_bwd]") {
  run_backward_runners("cpu", "conv2d_wgrad");
}

TEST_CASE("conv2d_dgrad matches the reference backward on the cuda backend", "[conv2d_bwd][gpu]") {
  LAB_REQUIRE_GPU_OR_SKIP();
  run_backward_runners("cuda", "conv2d_dgrad");
}

TEST_CASE("conv2d_wgrad matches the reference backward on the cuda backend", "[conv2d_bwd][gpu]") {
  LAB_REQUIRE_GPU_OR_SKIP();
  run_backward_runners("cuda", "conv2d_wgrad");
}

TEST_CASE("conv2d backward picks v2_tiled for dense 1/3/5 kernels, v5_depthwise for depthwise ones and "
          "splits long weight reductions",
          "[conv2d_bwd]") {
  CHECK(choose_conv_backward_variant({16, 32, 3, 2, 1, true}) == ConvBackwardVariant::Tiled);
  CHECK(choose_conv_backward_variant({48, 48, 3, 1, 48, true}) == ConvBackwardVariant::Depthwise);
  CHECK(choose_conv_backward_variant({48, 48, 7, 2, 48, true}, Precision::Fp16) ==
        ConvBackwardVariant::Depthwise);
  CHECK(choose_conv_backward_variant({48, 48, 1, 1, 48, true}) == ConvBackwardVariant::Direct);
  CHECK(choose_conv_backward_variant({12, 9, 3, 1, 3, true}) == ConvBackwardVariant::Direct);
  CHECK(choose_conv_backward_variant({6, 4, 7, 3, 1, true}) == ConvBackwardVariant::Direct);
  CHECK(conv_wgrad_kernel_name(ConvBackwardVariant::Depthwise, {8, 8, 5, 2, 8, true}) ==
        "conv2d_wgrad_depthwise<5>");
  CHECK(conv_dgrad_kernel_name(ConvBackwardVariant::Depthwise, {8, 8, 5, 2, 8, true}) ==
        "conv2d_dgrad_direct");
  CHECK(conv_dgrad_kernel_name(ConvBackwardVariant::Tiled, {3, 16, 3, 2, 1, true}) ==
        "conv2d_dgrad_tiled<3, 16>");
  CHECK(conv_wgrad_kernel_name(ConvBackwardVariant::Tiled, {3, 72, 1, 1, 1, true}) ==
        "conv2d_wgrad_tiled<1, 64>");
  CHECK(conv_wgrad_kernel_name(ConvBackwardVariant::Direct, {8, 8, 3, 1, 8, true}) == "conv2d_wgrad_direct");
  // The 16-bit weight gradient of a narrow 3x3 (C_OUT <= 16, C_IN * 9 <= 144) is conv2d_wgrad_narrow's.
  CHECK(conv_wgrad_kernel_name(ConvBackwardVariant::Fp16, {3, 16, 3, 2, 1, true}) ==
        "conv2d_wgrad_narrow<0, 3, 4>");
  CHECK(conv_wgrad_kernel_name(ConvBackwardVariant::Bf16, {16, 8, 3, 1, 1, true}) ==
        "conv2d_wgrad_narrow<1, 3, 18>");
  CHECK(conv_wgrad_kernel_name(ConvBackwardVariant::Fp16, {17, 16, 3, 1, 1, true}) ==
        "conv2d_wgrad_mma<0, 3, 16>");
  CHECK(conv_wgrad_kernel_name(ConvBackwardVariant::Fp16, {16, 17, 3, 1, 1, true}) ==
        "conv2d_wgrad_mma<0, 3, 32>");
  CHECK(conv_wgrad_kernel_name(ConvBackwardVariant::Tiled, {3, 16, 3, 2, 1, true}) ==
        "conv2d_wgrad_tiled<3, 16>");
  // The patch input gradients: K 3, stride 2, C_OUT a multiple of 8, tiled by C_IN (at most 32); never a
  // weight gradient, never the combined op's choice, the input gradient's at 16 bits where they run.
  CHECK(conv_dgrad_kernel_name(ConvBackwardVariant::Fp16Patch, {32, 64, 3, 2, 1, true}) ==
        "conv2d_dgrad_patch<0, 32>");
  CHECK(conv_dgrad_kernel_name(ConvBackwardVariant::Bf16Patch, {128, 256, 3, 2, 1, true}) ==
        "conv2d_dgrad_patch<1, 32>");
  CHECK(conv_backward_variant_problem(ConvBackwardVariant::Fp16Patch, {16, 12, 3, 2, 1, true}) ==
        "v6_fp16_patch needs K 3, stride 2 and C_OUT a multiple of 8 (got K 3, stride 2, C_OUT 12)");
  CHECK(!conv_backward_variant_problem(ConvBackwardVariant::Bf16Patch, {16, 16, 3, 1, 1, true}).empty());
  CHECK(choose_conv_backward_variant({64, 64, 3, 2, 1, true}, Precision::Fp16) == ConvBackwardVariant::Fp16);
  CHECK(choose_conv_input_grad_variant({64, 64, 3, 2, 1, true}, Precision::Fp16) ==
        ConvBackwardVariant::Fp16Patch);
  CHECK(choose_conv_input_grad_variant({64, 128, 3, 2, 1, true}, Precision::Bf16) ==
        ConvBackwardVariant::Bf16Patch);
  CHECK(choose_conv_input_grad_variant({64, 12, 3, 2, 1, true}, Precision::Fp16) ==
        ConvBackwardVariant::Fp16);
  CHECK(choose_conv_input_grad_variant({64, 64, 3, 1, 1, true}, Precision::Bf16) ==
        ConvBackwardVariant::Bf16);
  CHECK(choose_conv_input_grad_variant({64, 64, 3, 2, 1, true}, Precision::Tf32) ==
        ConvBackwardVariant::Tiled);
  for (const KernelVariant& v : conv2d_wgrad_spec().variants)
    CHECK(v.name.find("patch") == std::string::npos);

  auto backend = make_backend("cpu", test::embedded_context());
  CHECK_THROWS_WITH(Conv2dBackwardOp(*backend, {16, 32, 3, 2, 1, true}, std::vector<float>(16 * 32 * 9),
                                     std::nullopt, ConvBackwardVariant::Fp16Patch),
                    Catch::Contains("v6_fp16_patch computes only the input gradient"));
  const Conv2dShape split_shape{8, 16, 3, 1, 1, true};  // the split-K case of backward_cases()
  const Conv2dBackwardOp split(*backend, split_shape, std::vector<float>(size_t(split_shape.weight_count())),
                               std::nullopt, ConvBackwardVariant::Tiled);
  CHECK(split.weight_grad_splits(2, 32, 30) > 1);
  // Each split's partial weights, then each split's partial bias sums.
  CHECK(split.weight_grad_workspace_floats(2, 32, 30) ==
        size_t(split.weight_grad_splits(2, 32, 30)) * size_t(split_shape.weight_count() + split_shape.c_out));
  CHECK(split.weight_grad_splits(1, 4, 4) == 1);
  CHECK(split.weight_grad_workspace_floats(1, 4, 4) == 0);
  // Without splits the bias gradient is written whole by its CTAs: no workspace at any batch.
  CHECK(split.weight_grad_splits(2, 4, 4) == 1);
  CHECK(split.weight_grad_workspace_floats(2, 4, 4) == 0);
  // v1 still leaves the bias to conv2d_bias_grad, whose per-image sums need B x C_out floats above batch 1.
  const Conv2dBackwardOp direct(*backend, split_shape, std::vector<float>(size_t(split_shape.weight_count())),
                                std::nullopt, ConvBackwardVariant::Direct);
  CHECK(direct.weight_grad_workspace_floats(2, 4, 4) == size_t(2 * split_shape.c_out));
  // The ragged split case of backward_cases(): 2697 items, the last split short of a whole 32-item granule.
  const Conv2dShape ragged_shape{5, 24, 3, 1, 1, true};
  const Conv2dBackwardOp ragged(*backend, ragged_shape,
                                std::vector<float>(size_t(ragged_shape.weight_count())), std::nullopt,
                                ConvBackwardVariant::Tiled);
  CHECK(ragged.weight_grad_splits(3, 31, 29) > 1);
  // The depthwise ragged splits of backward_cases(): one CTA per channel and split.
  const Conv2dShape depthwise_shape{8, 8, 3, 1, 8, true};
  const Conv2dBackwardOp depthwise(*backend, depthwise_shape,
                                   std::vector<float>(size_t(depthwise_shape.weight_count())), std::nullopt,
                                   ConvBackwardVariant::Depthwise);
  CHECK(depthwise.weight_grad_splits(3, 31, 29) == 5);
  CHECK(depthwise.weight_grad_workspace_floats(3, 31, 29) ==
        size_t(5 * (depthwise_shape.weight_count() + depthwise_shape.c_out)));
  // yolo26n's detect-head DWConvs at batch 32, 640: about six CTAs per SM of an H200 (132 SMs), as many as
  // the kernel's 36 registers let an SM hold at 256 threads.
  for (const auto& [channels, size] : {std::pair{64, 80}, {80, 80}, {128, 40}, {256, 20}}) {
    const Conv2dShape head{channels, channels, 3, 1, channels, true};
    const Conv2dBackwardOp op(*backend, head, std::vector<float>(size_t(head.weight_count())), std::nullopt,
                              ConvBackwardVariant::Depthwise);
    const long long ctas = (long long)channels * op.weight_grad_splits(32, size, size);
    INFO(channels << " channels at " << size << ": " << ctas << " CTAs");
    CHECK((ctas >= 5 * 132 && ctas <= 8 * 132));
  }
  CHECK_THROWS_WITH(split.input_grad(1, 4, 4, nullptr, nullptr),
                    Catch::Contains("built without the input gradient"));
}

TEST_CASE("conv2d backward rules are enforced with the rule in the message", "[conv2d_bwd]") {
  for (const char* kernel : {"conv2d_dgrad", "conv2d_wgrad"}) {
    const Runner& r = Registry::instance().get(kernel);
    CHECK_THROWS_WITH(resolve_params(r, {{"C_IN", "12"}, {"GROUPS", "5"}}),
                      Catch::Contains(std::string("GROUPS=5 of ") + kernel + " is invalid"));
    CHECK_THROWS_WITH(resolve_params(r, {{"RESIDUAL", "true"}}), Catch::Contains("RESIDUAL"));
    auto backend = make_backend("cpu", test::embedded_context());
    const Params grouped = resolve_params(r, {{"C_IN", "8"}, {"C_OUT", "8"}, {"GROUPS", "8"}});
    CHECK_THROWS_WITH(r.instantiate(*backend, "v2_tiled", grouped, 1), Catch::Contains("needs groups = 1"));
    const Params k7 = resolve_params(r, {{"K", "7"}});
    CHECK_THROWS_WITH(r.instantiate(*backend, "v2_tiled", k7, 1), Catch::Contains("kernel sizes 1, 3, 5"));
    CHECK_THROWS_WITH(r.instantiate(*backend, "v5_depthwise", k7, 1),
                      Catch::Contains("needs groups = C_IN = C_OUT"));
    const Params grouped_k1 = resolve_params(r, {{"C_IN", "8"}, {"C_OUT", "8"}, {"GROUPS", "8"}, {"K", "1"}});
    CHECK_THROWS_WITH(r.instantiate(*backend, "v5_depthwise", grouped_k1, 1),
                      Catch::Contains("kernel sizes 3, 5, 7"));
  }
  auto backend = make_backend("cpu", test::embedded_context());
  CHECK_THROWS_WITH(Conv2dBackwardOp(*backend, {4, 4, 3, 1, 1, true}, std::vector<float>(5), 
                                     ConvBackwardVariant::Direct, std::nullopt),
                    Catch::Contains("got 5 weights, expected 144"));
}

TEST_CASE("the conv2d backward kernels compile for sm_90 without spills", "[conv2d_bwd]") {
  test::check_compiles_for_sm90_without_spills(conv2d_backward_module_request());
  test::check_compiles_for_sm90_without_spills(conv2d_backward_half_module_request());
}

// The 16-bit variants must really round (their error well above float32's) and stay within their bars.
TEST_CASE("conv2d backward v3_fp16 and v4_bf16 really round and stay within their tolerance", "[conv2d_bwd]") {
  auto backend = make_backend("cpu", test::embedded_context());
  for (const char* kernel : {"conv2d_dgrad", "conv2d_wgrad"}) {
    const Runner& r = Registry::instance().get(kernel);
    const Params p = resolve_params(r, {{"C_IN", "16"}, {"C_OUT", "32"}, {"H", "12"}, {"W", "10"}, {"K", "3"}});
    for (const char* variant : {"v3_fp16", "v4_bf16"}) {
      auto inst = r.instantiate(*backend, variant, p, 3);
      inst->launch();
      const OutputCheck c = inst->check(std::nullopt).front();  // grad_in or grad_weight
      INFO(kernel << "/" << variant << " rel_l2=" << c.metrics.rel_l2);
      CHECK(c.pass);
      CHECK(c.metrics.rel_l2 > 2e-5);
    }
  }
}

// The SiLU backward writes dz and, in the same pass, the bias gradient: dz against the float64 reference, db
// bit for bit what conv2d_bias_grad (v1's weight_grad without the SiLU backward's sums) finds from that dz,
// at batch 1 (straight into grad_bias) and 3: on a plane (37 x 41) that leaves a partial set of a thread's
// four loads and one (36 x 40) of whole sets and whole quads (in_quads: 16-byte accesses), the images in
// groups of two and one (per-group sums, then their reduction by each channel's last CTA), and on a small
// plane (5 x 7) all three images in one CTA's group (straight into grad_bias again); both outputs
// NaN-poisoned first, and again for a second launch of each.
TEST_CASE("the fused SiLU backward writes dz and the bias gradient conv2d_bias_grad would sum",
          "[conv2d_bwd]") {
  auto backend = make_backend("cpu", test::embedded_context());
  const Conv2dShape shape{4, 6, 1, 1, 1, true};
  for (const auto& [h, w] : {std::pair{37, 41}, std::pair{36, 40}, std::pair{5, 7}})
    for (int batch : {1, 3}) {
      const int plane = h * w;
      INFO("batch " << batch << ", " << h << " x " << w);
      const std::vector<float> in = random_uniform(size_t(batch) * shape.c_in * plane, -1.0f, 1.0f, 11);
      const std::vector<float> weight = random_uniform(size_t(shape.weight_count()), -0.7f, 0.7f, 12);
      const std::vector<float> bias = random_uniform(size_t(shape.c_out), -0.5f, 0.5f, 13);
      const std::vector<float> grad_out =
          random_uniform(size_t(batch) * shape.c_out * plane, -1.0f, 1.0f, 14);
      Conv2dShape linear = shape;
      linear.silu = false;
      const std::vector<double> z = conv2d_reference(linear, batch, h, w, in, weight, bias, {});
      const Conv2dGradients ref = conv2d_backward_reference(shape, batch, h, w, in, weight, bias, grad_out);

      const Conv2dBackwardOp op(*backend, shape, weight, std::nullopt, ConvBackwardVariant::Direct);
      const DeviceBuffer grad_out_d = backend->upload_vector(grad_out);
      const DeviceBuffer z_d = backend->upload_vector(std::vector<float>(z.begin(), z.end()));
      const DeviceBuffer in_d = backend->upload_vector(in);
      DeviceBuffer dz = backend->alloc_array<float>(grad_out.size());
      DeviceBuffer fused_bias = backend->alloc_array<float>(bias.size());
      DeviceBuffer summed_bias = backend->alloc_array<float>(bias.size());
      DeviceBuffer grad_w = backend->alloc_array<float>(weight.size());
      DeviceBuffer bias_workspace =
          backend->alloc_array<float>(std::max<size_t>(1, op.bias_grad_workspace_floats(batch)));
      DeviceBuffer workspace =
          backend->alloc_array<float>(std::max<size_t>(1, op.weight_grad_workspace_floats(batch, h, w)));
      for (const DeviceBuffer* out : {&dz, &fused_bias}) backend->fill_bytes(out->get(), 0xff, out->bytes());
      op.silu_backward(batch, plane, grad_out_d.as<const float>(), int64_t(shape.c_out) * plane,
                       z_d.as<const float>(), dz.as<float>(), fused_bias.as<float>(),
                       bias_workspace.as<float>());
      op.weight_grad(batch, h, w, dense_view(in_d.as<const float>(), shape.c_in, plane), dz.as<const float>(),
                     grad_w.as<float>(), summed_bias.as<float>(), workspace.as<float>());
      backend->synchronize();
      const std::vector<float> dz_h = backend->download_vector<float>(dz, grad_out.size());
      const Metrics m = compare_arrays(dz_h.data(), ref.grad_z.data(), dz_h.size());
      INFO("dz rel_l2=" << m.rel_l2 << " max_abs=" << m.max_abs);
      CHECK(m.rel_l2 < 1e-6);
      CHECK(m.non_finite == 0);
      const std::vector<float> fused = backend->download_vector<float>(fused_bias, bias.size());
      const std::vector<float> summed = backend->download_vector<float>(summed_bias, bias.size());
      CHECK(fused == summed);
      const Metrics b = compare_arrays(fused.data(), ref.grad_bias.data(), fused.size());
      INFO("db rel_l2=" << b.rel_l2);
      CHECK(b.rel_l2 < 1e-5);
      // Again into poisoned sums: each channel's last CTA left its arrival count at zero for this launch. dy
      // one float into a buffer this time: not 16-byte aligned, so a plane of whole quads (in_quads) reads it
      // by elements, in the same order.
      for (const DeviceBuffer* out : {&fused_bias, &summed_bias})
        backend->fill_bytes(out->get(), 0xff, out->bytes());
      std::vector<float> shifted(1, 0.0f);
      shifted.insert(shifted.end(), grad_out.begin(), grad_out.end());
      const DeviceBuffer shifted_d = backend->upload_vector(shifted);
      op.silu_backward(batch, plane, shifted_d.as<const float>() + 1, int64_t(shape.c_out) * plane,
                       z_d.as<const float>(), dz.as<float>(), fused_bias.as<float>(),
                       bias_workspace.as<float>());
      op.weight_grad(batch, h, w, dense_view(in_d.as<const float>(), shape.c_in, plane), dz.as<const float>(),
                     grad_w.as<float>(), summed_bias.as<float>(), workspace.as<float>());
      CHECK(backend->download_vector<float>(fused_bias, bias.size()) == fused);
      CHECK(backend->download_vector<float>(summed_bias, bias.size()) == summed);
    }
}

namespace {

// Dense [batch, channels, plane] values copied into channels [2, 2 + channels) of wide [batch, wide_channels,
// plane]: the channel slice the strided-view tests hand the kernels.
void place_channels(std::vector<float>& wide, int wide_channels, const std::vector<float>& dense,
                    int channels, int batch, int plane) {
  for (int b = 0; b < batch; ++b)
    std::copy_n(dense.begin() + size_t(b) * channels * plane, size_t(channels) * plane,
                wide.begin() + (size_t(b) * wide_channels + 2) * plane);
}

}  // namespace

// The weight gradient reads x through its batch stride: x as channels [2, 2 + C_in) of a wider NaN-filled
// tensor gives bit for bit the dense x's dW and db, for every weight-gradient variant (v2-v5 split their
// items here: batch 3 at 13 x 11); a channel stride other than the plane is refused.
TEST_CASE("conv2d_wgrad reads x as a batch-strided channel slice bit for bit as dense", "[conv2d_bwd]") {
  auto backend = make_backend("cpu", test::embedded_context());
  const int batch = 3, h = 13, w = 11, plane = h * w, extra = 4;
  const std::vector<std::pair<ConvBackwardVariant, Conv2dShape>> cases = {
      {ConvBackwardVariant::Direct, {5, 7, 3, 2, 1, false}},
      {ConvBackwardVariant::Tiled, {5, 7, 3, 1, 1, false}},
      {ConvBackwardVariant::Fp16, {6, 9, 1, 1, 1, false}},
      {ConvBackwardVariant::Depthwise, {6, 6, 3, 2, 6, false}}};
  for (const auto& [variant, shape] : cases) {
    INFO("variant " << int(variant));
    const int c_in = shape.c_in, wide_c = c_in + extra;
    const std::vector<float> x = random_uniform(size_t(batch) * c_in * plane, -1.0f, 1.0f, 21);
    std::vector<float> wide(size_t(batch) * wide_c * plane, std::nanf(""));
    place_channels(wide, wide_c, x, c_in, batch, plane);
    const std::vector<float> weight = random_uniform(size_t(shape.weight_count()), -0.7f, 0.7f, 22);
    const Conv2dBackwardOp op(*backend, shape, weight, std::nullopt, variant);
    const std::vector<float> dz =
        random_uniform(size_t(batch) * shape.c_out * shape.out_size(h) * shape.out_size(w), -1.0f, 1.0f, 23);
    const DeviceBuffer x_d = backend->upload_vector(x), wide_d = backend->upload_vector(wide);
    const DeviceBuffer dz_d = backend->upload_vector(dz);
    DeviceBuffer workspace =
        backend->alloc_array<float>(std::max<size_t>(1, op.weight_grad_workspace_floats(batch, h, w)));
    auto gradients = [&](ConstPlaneView in) {
      DeviceBuffer grad_w = backend->alloc_array<float>(weight.size());
      DeviceBuffer grad_b = backend->alloc_array<float>(size_t(shape.c_out));
      op.weight_grad(batch, h, w, in, dz_d.as<const float>(), grad_w.as<float>(), grad_b.as<float>(),
                     workspace.as<float>());
      std::vector<float> all = backend->download_vector<float>(grad_w, weight.size());
      const std::vector<float> db = backend->download_vector<float>(grad_b, size_t(shape.c_out));
      all.insert(all.end(), db.begin(), db.end());
      return all;
    };
    const std::vector<float> dense = gradients(dense_view(x_d.as<const float>(), c_in, plane));
    const std::vector<float> sliced =
        gradients(ConstPlaneView(wide_d.as<const float>() + 2 * plane, int64_t(wide_c) * plane, plane));
    CHECK(std::all_of(dense.begin(), dense.end(), [](float v) { return std::isfinite(v); }));
    CHECK(std::memcmp(dense.data(), sliced.data(), dense.size() * sizeof(float)) == 0);
    CHECK_THROWS_AS(
        op.weight_grad(batch, h, w, ConstPlaneView(x_d.as<const float>(), int64_t(c_in) * plane, plane + 1),
                       dz_d.as<const float>(), nullptr, nullptr, workspace.as<float>()),
        UsageError);
  }
}

// The input gradient writes into dx's batch stride, or adds to it in place: into channels [2, 2 + C_in) of a
// wider tensor, dx written gives the dense dx bit for bit and leaves the other channels as they were; with
// `accumulate` it gives earlier + dx, bit for bit add_planes' sum of the dense dx onto the same earlier
// values (the tape's second contribution), for v1 (depthwise) and v2-v4 at stride 2 (the GEMM's stride-phase
// epilogue); a channel stride other than the plane is refused.
TEST_CASE("conv2d_dgrad writes or adds into a batch-strided channel slice bit for bit", "[conv2d_bwd]") {
  auto backend = make_backend("cpu", test::embedded_context());
  NnBackwardKernels kernels(*backend);
  const int batch = 3, h = 13, w = 11, plane = h * w, extra = 4;
  const std::vector<std::pair<ConvBackwardVariant, Conv2dShape>> cases = {
      {ConvBackwardVariant::Direct, {6, 6, 3, 2, 6, false}},
      {ConvBackwardVariant::Tiled, {5, 7, 3, 2, 1, false}},
      {ConvBackwardVariant::Fp16, {6, 9, 3, 2, 1, false}},
      {ConvBackwardVariant::Bf16, {16, 20, 3, 2, 1, false}},
      {ConvBackwardVariant::Fp16Patch, {6, 24, 3, 2, 1, false}},
      {ConvBackwardVariant::Bf16Patch, {40, 8, 3, 2, 1, false}}};
  for (const auto& [variant, shape] : cases) {
    INFO("variant " << int(variant));
    const int c_in = shape.c_in, wide_c = c_in + extra;
    const size_t count = size_t(batch) * c_in * plane, wide_count = size_t(batch) * wide_c * plane;
    const std::vector<float> weight = random_uniform(size_t(shape.weight_count()), -0.7f, 0.7f, 31);
    const Conv2dBackwardOp op(*backend, shape, weight, variant, std::nullopt);
    const std::vector<float> dz =
        random_uniform(size_t(batch) * shape.c_out * shape.out_size(h) * shape.out_size(w), -1.0f, 1.0f, 32);
    const std::vector<float> earlier = random_uniform(wide_count, -1.0f, 1.0f, 33);
    const DeviceBuffer dz_d = backend->upload_vector(dz);
    DeviceBuffer dense = backend->alloc_array<float>(count);
    op.input_grad(batch, h, w, dz_d.as<const float>(), dense.as<float>());
    const std::vector<float> dx = backend->download_vector<float>(dense, count);
    CHECK(std::all_of(dx.begin(), dx.end(), [](float v) { return std::isfinite(v); }));
    for (const bool accumulate : {false, true}) {
      INFO("accumulate " << accumulate);
      DeviceBuffer wide = backend->upload_vector(earlier);
      op.input_grad(batch, h, w, dz_d.as<const float>(),
                    PlaneView(wide.as<float>() + 2 * plane, int64_t(wide_c) * plane, plane), accumulate);
      std::vector<float> want = earlier;
      if (accumulate) {  // add_planes onto a copy of the same earlier values
        DeviceBuffer summed = backend->upload_vector(earlier);
        AddPlanesOp(kernels).run(batch, c_in, plane, dense_view(dense.as<const float>(), c_in, plane),
                                 PlaneView(summed.as<float>() + 2 * plane, int64_t(wide_c) * plane, plane),
                                 GradientWrite::Accumulate);
        want = backend->download_vector<float>(summed, wide_count);
      } else {
        place_channels(want, wide_c, dx, c_in, batch, plane);
      }
      const std::vector<float> got = backend->download_vector<float>(wide, wide_count);
      CHECK(std::memcmp(got.data(), want.data(), wide_count * sizeof(float)) == 0);
    }
    CHECK_THROWS_AS(op.input_grad(batch, h, w, dz_d.as<const float>(),
                                  PlaneView(dense.as<float>(), int64_t(c_in) * plane, plane + 1), false),
                    UsageError);
  }
}

// The folded SiLU backward of x's conv (GradientTape::fold_silu_backwards) in the input gradient's epilogue:
// dx = silu'(z) * the gradient, z the pre-activation under x, against the float64 reference's dx times the
// derivative in float64, on every variant (v1 for the depthwise and grouped convs, v2 / v3 / v4 at stride 2,
// partial channel tiles and 1, 2 or 4 taps per stride class), into a poisoned dx. The bars are the
// runner's (conv_backward_gradient_tolerance): silu' lies in about [-0.1, 1.1], so it scales no error up. A
// gate with an accumulated gradient, or on channels that are not dense planes, is refused.
TEST_CASE("conv2d_dgrad multiplies by SiLU's derivative at a gate when asked", "[conv2d_bwd]") {
  auto backend = make_backend("cpu", test::embedded_context());
  struct GateCase {
    ConvBackwardVariant variant;
    Conv2dShape shape;
    int batch, h, w;
  };
  const GateCase cases[] = {
      {ConvBackwardVariant::Direct, {8, 8, 3, 2, 8, false}, 2, 9, 11},
      {ConvBackwardVariant::Direct, {12, 9, 3, 1, 3, false}, 1, 7, 8},
      {ConvBackwardVariant::Tiled, {16, 32, 3, 2, 1, false}, 2, 13, 11},
      {ConvBackwardVariant::Tiled, {70, 36, 3, 2, 1, false}, 1, 9, 7},
      {ConvBackwardVariant::Fp16, {16, 32, 3, 2, 1, false}, 2, 13, 11},
      {ConvBackwardVariant::Fp16, {70, 40, 3, 2, 1, false}, 1, 9, 7},
      {ConvBackwardVariant::Bf16, {32, 64, 3, 2, 1, false}, 2, 10, 12},
      // The patch variants: dx tiles cut by the plane's edges both ways (odd sizes, three tiles across), a
      // 16-channel block half past C_OUT, two channel tiles of dx.
      {ConvBackwardVariant::Fp16Patch, {16, 32, 3, 2, 1, false}, 2, 13, 11},
      {ConvBackwardVariant::Fp16Patch, {72, 8, 3, 2, 1, false}, 1, 9, 70},
      {ConvBackwardVariant::Bf16Patch, {40, 72, 3, 2, 1, false}, 1, 37, 35},
  };
  for (const GateCase& c : cases) {
    const Conv2dShape& s = c.shape;
    INFO("variant " << int(c.variant) << " " << s.c_in << "->" << s.c_out << " k" << s.kernel << " s"
                    << s.stride << " g" << s.groups);
    const int plane = c.h * c.w;
    const size_t count = size_t(c.batch) * s.c_in * plane;
    const Conv2dInputs inputs = conv2d_random_inputs(s, c.batch, c.h, c.w, 41);
    const std::vector<float> dz =
        random_uniform(size_t(c.batch) * s.c_out * s.out_size(c.h) * s.out_size(c.w), -1.0f, 1.0f, 42);
    // z of a SiLU layer: wide enough that silu' takes values from about -0.1 to 1.1.
    const std::vector<float> z = random_uniform(count, -6.0f, 6.0f, 43);
    const Conv2dBackwardOp op(*backend, s, inputs.weight, c.variant, std::nullopt);
    const DeviceBuffer dz_d = backend->upload_vector(dz), z_d = backend->upload_vector(z);
    DeviceBuffer dx = backend->alloc_array<float>(count);
    backend->fill_bytes(dx.get(), 0xFF, dx.bytes());  // NaN: every element must be written
    op.input_grad(c.batch, c.h, c.w, dz_d.as<const float>(), dense_view(dx.as<float>(), s.c_in, plane), false,
                  dense_view(z_d.as<const float>(), s.c_in, plane));
    std::vector<double> want =
        conv2d_backward_reference(s, c.batch, c.h, c.w, inputs.in, inputs.weight, inputs.bias, dz).grad_in;
    for (size_t i = 0; i < count; ++i) {
      const double zi = z[i], sig = 1.0 / (1.0 + std::exp(-zi));
      want[i] *= sig * (1.0 + zi * (1.0 - sig));
    }
    const OutputCheck check = make_check("dx", {size_t(c.batch), size_t(s.c_in), size_t(c.h), size_t(c.w)},
                                         backend->download_vector<float>(dx, count), want,
                                         conv_backward_gradient_tolerance(c.variant, want, false), false);
    INFO("rel_l2 " << check.metrics.rel_l2 << " max_abs " << check.metrics.max_abs << " non-finite "
                   << check.metrics.non_finite);
    CHECK(check.pass);
    CHECK_THROWS_AS(
        op.input_grad(c.batch, c.h, c.w, dz_d.as<const float>(), dense_view(dx.as<float>(), s.c_in, plane),
                      true, dense_view(z_d.as<const float>(), s.c_in, plane)),
        UsageError);
    CHECK_THROWS_AS(
        op.input_grad(c.batch, c.h, c.w, dz_d.as<const float>(), dense_view(dx.as<float>(), s.c_in, plane),
                      false, ConstPlaneView(z_d.as<const float>(), int64_t(s.c_in) * plane, plane + 1)),
        UsageError);
  }
}

// The 1x1 weight-gradient GEMMs stage by vector loads where the planes keep 16-byte alignment
// (WgradStaging1x1) and one value at a time elsewhere (WgradStaging), into the same tiles: x at an aligned
// address takes the first, x one float further the second, and both must give the same bits, for v2, v3 and
// v4 at TM 16 / 32 / 64 (partial channel tiles), on planes whose 8-item sectors stay in one image (12 x 10,
// 16 x 16) or cross into the next (10 x 10, 2 x 2), with and without split-K (its second split starting
// mid-image).
TEST_CASE("conv2d_wgrad's 1x1 vector staging gives the generic staging's bits", "[conv2d_bwd]") {
  auto backend = make_backend("cpu", test::embedded_context());
  struct Case {
    int c_in, c_out, batch, h, w;
    bool split;
  };
  const Case cases[] = {{300, 16, 3, 12, 10, false},
                        {24, 40, 12, 10, 10, true},
                        {70, 20, 5, 2, 2, false},
                        {8, 72, 4, 16, 16, true}};
  for (ConvBackwardVariant variant :
       {ConvBackwardVariant::Tiled, ConvBackwardVariant::Fp16, ConvBackwardVariant::Bf16}) {
    for (const Case& c : cases) {
      INFO("variant " << int(variant) << " C_in " << c.c_in << " C_out " << c.c_out << " batch " << c.batch
                      << " " << c.h << " x " << c.w);
      const Conv2dShape shape{c.c_in, c.c_out, 1, 1, 1, false};
      const int plane = c.h * c.w;
      const size_t x_count = size_t(c.batch) * c.c_in * plane;
      const std::vector<float> x = random_uniform(x_count, -1.0f, 1.0f, 31);
      std::vector<float> shifted(x_count + 1, std::nanf(""));
      std::copy(x.begin(), x.end(), shifted.begin() + 1);
      const std::vector<float> weight = random_uniform(size_t(shape.weight_count()), -0.7f, 0.7f, 32);
      const std::vector<float> dz = random_uniform(size_t(c.batch) * c.c_out * plane, -1.0f, 1.0f, 33);
      const Conv2dBackwardOp op(*backend, shape, weight, std::nullopt, variant);
      CHECK((op.weight_grad_splits(c.batch, c.h, c.w) > 1) == c.split);
      const DeviceBuffer x_d = backend->upload_vector(x), shifted_d = backend->upload_vector(shifted);
      const DeviceBuffer dz_d = backend->upload_vector(dz);
      DeviceBuffer workspace = backend->alloc_array<float>(
          std::max<size_t>(1, op.weight_grad_workspace_floats(c.batch, c.h, c.w)));
      auto gradients = [&](const float* in) {
        DeviceBuffer grad_w = backend->alloc_array<float>(weight.size());
        DeviceBuffer grad_b = backend->alloc_array<float>(size_t(c.c_out));
        backend->fill_bytes(grad_w.get(), 0xff, grad_w.bytes());
        op.weight_grad(c.batch, c.h, c.w, dense_view(in, c.c_in, plane), dz_d.as<const float>(),
                       grad_w.as<float>(), grad_b.as<float>(), workspace.as<float>());
        return backend->download_vector<float>(grad_w, weight.size());
      };
      const std::vector<float> vectors = gradients(x_d.as<const float>());
      const std::vector<float> one_by_one = gradients(shifted_d.as<const float>() + 1);
      CHECK(std::all_of(vectors.begin(), vectors.end(), [](float v) { return std::isfinite(v); }));
      CHECK(std::memcmp(vectors.data(), one_by_one.data(), vectors.size() * sizeof(float)) == 0);
    }
  }
}
