// nn kernels: every nn runner on the cpu backend at a few shapes (and on cuda in the [gpu] twin), the conv
// variant choice (and the TF32 precision knob) and parameter rules, every conv variant's optional
// pre-activation output and SiLU-backward gate, views into concat slices and the detect head's anchor
// ranges, and the sm_90 resource use (registers, no spills) of the whole nn module.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <optional>

#include "kernels/nn/conv2d_inputs.hpp"
#include "kernels/nn/conv2d_op.hpp"
#include "kernels/nn/conv2d_reference.hpp"
#include "kernels/nn/plane_ops.hpp"
#include "kernels/nn/sliced_buffer.hpp"
#include "nvrtc_runtime/errors.hpp"
#include "kernels/runner.hpp"
#include "tests/sm90_resources.hpp"
#include "tests/test_helpers.hpp"

using namespace lab;

namespace {

void run_runner(Backend& backend, const std::string& kernel, const std::string& variant,
                const Params& given) {
  const Runner& r = Registry::instance().get(kernel);
  const Params p = resolve_params(r, given);
  auto inst = r.instantiate(backend, resolve_variant(r, variant), p, 11);
  for (int round = 0; round < 2;
       ++round) {  // the second launch after re-poisoning must write everything again
    inst->poison();
    inst->launch();
    for (const OutputCheck& c : inst->check(std::nullopt)) {
      INFO(backend.name() << " " << kernel << "/" << variant << " " << c.output
                          << " rel_l2=" << c.metrics.rel_l2 << " max_abs=" << c.metrics.max_abs
                          << " non-finite=" << c.metrics.non_finite);
      CHECK(c.pass);
    }
  }
}

using Case = std::pair<std::string, Params>;  // variant, parameters

const std::vector<Case>& conv_cases() {
  static const std::vector<Case> cases = {
      {"v2_tiled", {{"C_IN", "16"}, {"C_OUT", "24"}, {"H", "9"}, {"W", "11"}, {"K", "3"}}},
      {"v2_tiled",
       {{"B", "2"}, {"C_IN", "40"}, {"C_OUT", "70"}, {"H", "6"}, {"W", "5"}, {"K", "1"}, {"SILU", "false"}}},
      {"v2_tiled", {{"C_IN", "3"}, {"C_OUT", "16"}, {"H", "17"}, {"W", "12"}, {"K", "3"}, {"STRIDE", "2"}}},
      {"v2_tiled", {{"C_IN", "6"}, {"C_OUT", "6"}, {"H", "8"}, {"W", "7"}, {"K", "5"}, {"RESIDUAL", "true"}}},
      {"v3_depthwise",
       {{"C_IN", "8"}, {"C_OUT", "8"}, {"GROUPS", "8"}, {"H", "13"}, {"W", "35"}, {"K", "3"}}},
      {"v3_depthwise",
       {{"C_IN", "4"},
        {"C_OUT", "4"},
        {"GROUPS", "4"},
        {"H", "19"},
        {"W", "6"},
        {"K", "5"},
        {"STRIDE", "2"}}},
      {"v1_direct", {{"C_IN", "12"}, {"C_OUT", "9"}, {"GROUPS", "3"}, {"H", "7"}, {"W", "8"}, {"K", "3"}}},
      {"v1_direct",
       {{"C_IN", "6"},
        {"C_OUT", "4"},
        {"H", "7"},
        {"W", "9"},
        {"K", "7"},
        {"STRIDE", "3"},
        {"RESIDUAL", "true"}}},
      {"auto", {{"C_IN", "10"}, {"C_OUT", "10"}, {"GROUPS", "10"}, {"H", "5"}, {"W", "5"}, {"K", "3"}}},
      // Small outputs with deep reductions take the split-K path (checked to split below).
      {"v2_tiled",
       {{"C_IN", "64"}, {"C_OUT", "16"}, {"H", "7"}, {"W", "6"}, {"K", "3"}, {"RESIDUAL", "true"}}},
      {"v2_tiled", {{"B", "2"}, {"C_IN", "300"}, {"C_OUT", "72"}, {"H", "5"}, {"W", "4"}, {"K", "1"}}},
      // v4_tf32 (its own tolerance): a partial chunk at stride 2, and split-K with a residual.
      {"v4_tf32", {{"C_IN", "3"}, {"C_OUT", "16"}, {"H", "17"}, {"W", "12"}, {"K", "3"}, {"STRIDE", "2"}}},
      {"v4_tf32",
       {{"C_IN", "64"}, {"C_OUT", "16"}, {"H", "7"}, {"W", "6"}, {"K", "3"}, {"RESIDUAL", "true"}}},
  };
  return cases;
}

const std::vector<std::pair<std::string, Params>>& plane_cases() {
  static const std::vector<std::pair<std::string, Params>> cases = {
      {"maxpool2d", {{"C", "6"}, {"H", "9"}, {"W", "7"}, {"K", "5"}}},
      {"maxpool2d", {{"B", "2"}, {"C", "3"}, {"H", "3"}, {"W", "11"}, {"K", "7"}}},
      {"upsample_nearest2x", {{"B", "2"}, {"C", "5"}, {"H", "3"}, {"W", "4"}}},
      {"copy_planes", {{"B", "3"}, {"C", "7"}, {"H", "5"}, {"W", "3"}}},
      {"topk_postprocess", {{"A", "2100"}, {"NC", "80"}}},
      {"topk_postprocess", {{"B", "2"}, {"A", "50"}, {"NC", "3"}, {"MAX_DET", "300"}}},
      {"topk_postprocess", {{"A", "900"}, {"NC", "10"}, {"MAX_DET", "100"}, {"TIES", "true"}}},
  };
  return cases;
}

void run_all_nn_runners(const std::string& backend_name) {
  auto backend = make_backend(backend_name, test::embedded_context());
  for (const auto& [variant, p] : conv_cases()) run_runner(*backend, "conv2d", variant, p);
  for (const auto& [kernel, p] : plane_cases()) run_runner(*backend, kernel, "", p);
}

}  // namespace

TEST_CASE("nn runners match their references on the cpu backend", "[nn]") {
  run_all_nn_runners("cpu");
}

TEST_CASE("nn runners match their references on the cuda backend", "[nn][gpu]") {
  LAB_REQUIRE_GPU_OR_SKIP();
  run_all_nn_runners("cuda");
}

TEST_CASE("Conv2dOp picks the variant from the shape", "[nn]") {
  CHECK(choose_conv_variant({3, 16, 3, 2, 1, true}) == ConvVariant::Tiled);
  CHECK(choose_conv_variant({64, 64, 3, 1, 64, true}) == ConvVariant::Depthwise);
  CHECK(choose_conv_variant({128, 128, 3, 1, 128, false}) == ConvVariant::Depthwise);
  CHECK(choose_conv_variant({32, 64, 3, 1, 4, true}) == ConvVariant::Direct);  // grouped
  CHECK(choose_conv_variant({8, 8, 7, 1, 1, true}) == ConvVariant::Direct);    // no K = 7 instantiation
  CHECK(conv_tiled_channel_tile(16) == 16);
  CHECK(conv_tiled_channel_tile(17) == 32);
  CHECK(conv_tiled_channel_tile(80) == 64);
  CHECK(conv_kernel_name(ConvVariant::Tiled, {32, 64, 3, 1, 1, true}) == "conv2d_tiled<3, 64>");
  // TF32 only where the op would run v2: depthwise, grouped and K = 7 convs keep their float32 variants.
  CHECK(choose_conv_variant({3, 16, 3, 2, 1, true}, Precision::Tf32) == ConvVariant::Tf32);
  CHECK(choose_conv_variant({3, 16, 3, 2, 1, true}, Precision::Fp32) == ConvVariant::Tiled);
  CHECK(choose_conv_variant({3, 16, 3, 2, 1, true}, Precision::Fp16) == ConvVariant::Fp16);
  CHECK(choose_conv_variant({64, 32, 1, 1, 1, true}, Precision::Bf16) == ConvVariant::Bf16);
  // v7_fp16_patch for the dense 3x3 stride-1 convs it runs (c_in a multiple of 8), v5 at stride 2; bf16
  // keeps v6 (v8 only when forced).
  CHECK(choose_conv_variant({32, 64, 3, 1, 1, true}, Precision::Fp16) == ConvVariant::Fp16Patch);
  CHECK(choose_conv_variant({64, 64, 3, 1, 1, false}, Precision::Bf16) == ConvVariant::Bf16);
  CHECK(choose_conv_variant({64, 128, 3, 2, 1, true}, Precision::Bf16) == ConvVariant::Bf16);
  CHECK(choose_conv_variant({12, 64, 3, 1, 1, true}, Precision::Fp16) == ConvVariant::Fp16);
  CHECK(choose_conv_variant({32, 64, 3, 1, 1, true}, Precision::Tf32) == ConvVariant::Tf32);
  CHECK(choose_conv_variant({64, 64, 3, 1, 64, true}, Precision::Bf16) == ConvVariant::Depthwise);
  CHECK(choose_conv_variant({64, 64, 3, 1, 64, true}, Precision::Tf32) == ConvVariant::Depthwise);
  CHECK(choose_conv_variant({32, 64, 3, 1, 4, true}, Precision::Tf32) == ConvVariant::Direct);
  CHECK(choose_conv_variant({8, 8, 7, 1, 1, true}, Precision::Tf32) == ConvVariant::Direct);
  CHECK(conv_kernel_name(ConvVariant::Tf32, {32, 24, 1, 1, 1, true}) == "conv2d_tf32<1, 32>");
  CHECK(conv_variant_name(ConvVariant::Tf32) == "v4_tf32");
  CHECK(parse_precision("tf32") == Precision::Tf32);
  CHECK(parse_precision("fp32") == Precision::Fp32);
  CHECK(parse_precision("fp16") == Precision::Fp16);
  CHECK(parse_precision("bf16") == Precision::Bf16);
  CHECK(!parse_precision("fp8"));
  CHECK(conv_kernel_name(ConvVariant::Bf16, {32, 24, 3, 1, 1, true}) == "conv2d_mma<1, 3, 32>");
  CHECK(conv_variant_name(ConvVariant::Fp16) == "v5_fp16");
  // The patch variants' rules.
  CHECK(conv_variant_problem(ConvVariant::Fp16Patch, {16, 32, 3, 1, 1, true}).empty());
  CHECK(conv_variant_problem(ConvVariant::Bf16Patch, {64, 8, 3, 1, 1, false}).empty());
  CHECK(conv_variant_problem(ConvVariant::Fp16Patch, {16, 32, 3, 2, 1, true}).empty());
  CHECK(!conv_variant_problem(ConvVariant::Fp16Patch, {16, 32, 3, 3, 1, true}).empty());   // stride 3
  CHECK(!conv_variant_problem(ConvVariant::Fp16Patch, {16, 16, 3, 2, 1, true}).empty());   // s2, c_out 16
  CHECK(!conv_variant_problem(ConvVariant::Fp16Patch, {16, 32, 5, 1, 1, true}).empty());   // K 5
  CHECK(!conv_variant_problem(ConvVariant::Bf16Patch, {16, 16, 3, 1, 16, true}).empty());  // depthwise
  CHECK(conv_kernel_name(ConvVariant::Fp16Patch, {32, 24, 3, 1, 1, true}) == "conv2d_mma_patch<0, 1, 32>");
  CHECK(conv_kernel_name(ConvVariant::Bf16Patch, {32, 80, 3, 2, 1, true}) == "conv2d_mma_patch<1, 2, 64>");
  CHECK(conv_variant_name(ConvVariant::Bf16Patch) == "v8_bf16_patch");
  CHECK(conv_variant_problem(ConvVariant::Fp16Patch, {12, 32, 3, 1, 1, true}) ==
        "v7_fp16_patch needs K 3, stride 1 or 2 (2: c_out above 16), groups 1 and c_in a multiple of 8 (got "
        "12->32 k3 s1 g1)");
}

TEST_CASE("conv2d's tf32, fp16 and bf16 variants really round and stay within their tolerance", "[nn]") {
  auto backend = make_backend("cpu", test::embedded_context());
  const Runner& conv = Registry::instance().get("conv2d");
  const Params p =
      resolve_params(conv, {{"C_IN", "32"}, {"C_OUT", "24"}, {"H", "9"}, {"W", "7"}, {"K", "3"}});
  for (const std::string variant :
       {"v2_tiled", "v4_tf32", "v5_fp16", "v6_bf16", "v7_fp16_patch", "v8_bf16_patch"}) {
    auto inst = conv.instantiate(*backend, variant, p, 5);
    inst->poison();
    inst->launch();
    const OutputCheck c = inst->check(std::nullopt).front();
    INFO(variant << " rel_l2 " << c.metrics.rel_l2 << " max_abs " << c.metrics.max_abs);
    CHECK(c.pass);
    if (variant == "v2_tiled") {
      CHECK(c.metrics.rel_l2 < 1e-6);  // float32
    } else {
      // 10-bit mantissas (tf32, fp16) show, and 7-bit ones (bf16) show eight times as much.
      const bool bf16 = variant == "v6_bf16" || variant == "v8_bf16_patch";
      CHECK(c.metrics.rel_l2 > (bf16 ? 3e-4 : 3e-5));
      CHECK(c.metrics.rel_l2 < c.tolerance.rel_l2 / 3);
    }
  }
}

TEST_CASE("Conv2dOp splits deep reductions of small outputs and sizes the workspace", "[nn]") {
  auto backend = make_backend("cpu", test::embedded_context());
  NnKernels kernels(*backend);
  const Conv2dShape head{64, 16, 3, 1, 1, true}, wide{300, 72, 1, 1, 1, true};
  const Conv2dOp head_op(kernels, head, std::vector<float>(size_t(head.weight_count()), 0.5f),
                         std::vector<float>(16, 0.1f));
  const Conv2dOp wide_op(kernels, wide, std::vector<float>(size_t(wide.weight_count()), 0.5f),
                         std::vector<float>(72, 0.1f));
  CHECK(head_op.splitk_splits(1, 7, 6) == 4);  // 576 rows = 36 chunks, at least 8 per split
  CHECK(head_op.splitk_workspace_floats(1, 7, 6) == size_t(4) * 16 * 42);
  CHECK(wide_op.splitk_splits(2, 5, 4) == 2);      // 300 rows = 19 chunks
  CHECK(head_op.splitk_splits(1, 640, 640) == 1);  // a large output fills the GPU unsplit
  CHECK(head_op.splitk_workspace_floats(1, 640, 640) == 0);
  // v5 / v6 split whole 32-row chunks: 576 rows = 18 chunks, at least 4 per split, 5 per split.
  const Conv2dOp head_fp16(kernels, head, std::vector<float>(size_t(head.weight_count()), 0.5f),
                           std::vector<float>(16, 0.1f), Precision::Fp16, ConvVariant::Fp16);
  CHECK(head_fp16.splitk_splits(1, 7, 6) == 4);
  CHECK(head_fp16.splitk_splits(1, 640, 640) == 1);
  // v7 / v8 split whole 16-channel blocks, at least 2 per split: 64 channels = 4 blocks, 2 splits. At Fp16
  // a 3x3 stride-1 conv chooses v7 by itself.
  const Conv2dOp head_patch(kernels, head, std::vector<float>(size_t(head.weight_count()), 0.5f),
                            std::vector<float>(16, 0.1f), Precision::Fp16);
  CHECK(head_patch.variant() == ConvVariant::Fp16Patch);
  CHECK(head_patch.splitk_splits(1, 7, 6) == 2);
  CHECK(head_patch.splitk_workspace_floats(1, 7, 6) == size_t(2) * 16 * 42);
  CHECK(head_patch.splitk_splits(1, 640, 640) == 1);
}

namespace {

// One case of the conv epilogue tests below: a variant at a shape, and whether a residual is added and the
// reduction is split.
struct EpilogueCase {
  ConvVariant variant;
  Conv2dShape shape;
  int batch, h, w;
  bool residual, split;
};

// The runner's bars (conv2d_runner.cpp): float32; 10 mantissa bits (TF32, fp16); bf16's 7.
Tolerance epilogue_tolerance(ConvVariant v) {
  if (conv_variant_half_type(v) == HalfType::bf16) return Tolerance{1.6e-2, 4e-2};
  if (v == ConvVariant::Tf32 || conv_variant_half_type(v) == HalfType::f16) return Tolerance{2e-3, 5e-3};
  return Tolerance{};
}

// A case's conv with random inputs (seed), its input and optional residual (seed + 1) in channel windows of
// poisoned buffers, the split-K workspace it needs, and its poisoned output window.
struct EpilogueRun {
  EpilogueRun(Backend& backend, NnKernels& kernels, const EpilogueCase& c, uint64_t seed)
      : shape(c.shape),
        inputs(conv2d_random_inputs(c.shape, c.batch, c.h, c.w, seed)),
        in(backend, c.batch, c.shape.c_in, int64_t(c.h) * c.w),
        out(backend, c.batch, c.shape.c_out, plane_out(c)),
        op(kernels, c.shape, inputs.weight, inputs.bias, Precision::Fp32, c.variant) {
    in.upload_window(inputs.in);
    if (c.residual) {
      residual_host = random_uniform(out.window_elements(), -1.0f, 1.0f, seed + 1);
      residual.emplace(backend, c.batch, c.shape.c_out, plane_out(c), 2, 2);
      residual->upload_window(residual_host);
    }
    CHECK((op.splitk_splits(c.batch, c.h, c.w) > 1) == c.split);
    if (size_t floats = op.splitk_workspace_floats(c.batch, c.h, c.w))
      splitk = backend.alloc_array<float>(floats);
    out.poison();
  }
  static int64_t plane_out(const EpilogueCase& c) {
    return int64_t(c.shape.out_size(c.h)) * c.shape.out_size(c.w);
  }
  ConstPlaneView residual_view() const {
    return residual ? ConstPlaneView(residual->view()) : ConstPlaneView{};
  }
  std::vector<size_t> dims(const EpilogueCase& c) const {
    return {size_t(c.batch), size_t(shape.c_out), size_t(shape.out_size(c.h)), size_t(shape.out_size(c.w))};
  }
  // Each check passes (with its metrics in the message).
  static void require(std::initializer_list<OutputCheck> checks) {
    for (const OutputCheck& check : checks) {
      INFO(check.output << " rel_l2 " << check.metrics.rel_l2 << " max_abs " << check.metrics.max_abs);
      CHECK(check.pass);
    }
  }

  Conv2dShape shape;
  Conv2dInputs inputs;
  SlicedBuffer in, out;
  std::vector<float> residual_host;
  std::optional<SlicedBuffer> residual;
  Conv2dOp op;
  DeviceBuffer splitk;
};

}  // namespace

namespace {

// pre = conv(x) + b (the training forward's z) and out = act(pre) (+ residual) from one run, each through a
// channel window of a poisoned buffer, against float64; split-K runs pre through conv2d_splitk_reduce.
void check_pre_activation_outputs(const std::string& backend_name) {
  const EpilogueCase cases[] = {
      {ConvVariant::Direct, {12, 9, 3, 1, 3, true}, 2, 7, 8, true, false},
      {ConvVariant::Tiled, {16, 24, 3, 1, 1, true}, 2, 9, 11, false, false},
      {ConvVariant::Tiled, {64, 16, 3, 1, 1, true}, 1, 7, 6, true, true},
      {ConvVariant::Depthwise, {8, 8, 3, 2, 8, true}, 2, 13, 35, true, false},
      {ConvVariant::Tf32, {3, 16, 3, 2, 1, true}, 1, 17, 12, false, false},
      {ConvVariant::Tf32, {64, 16, 3, 1, 1, true}, 1, 7, 6, true, true},
      {ConvVariant::Fp16, {32, 24, 1, 1, 1, true}, 2, 9, 7, true, false},
      {ConvVariant::Fp16, {64, 16, 3, 1, 1, true}, 1, 7, 6, true, true},
      {ConvVariant::Bf16, {3, 16, 3, 2, 1, false}, 1, 17, 12, true, false},
      {ConvVariant::Bf16, {64, 16, 3, 1, 1, true}, 1, 7, 6, false, true},
      // The patch variants: tiles cut by the plane's edges (two across, two down), odd widths (no pixel
      // pairs), a channel block half past c_in, two channel tiles, and split-K over the channel blocks.
      {ConvVariant::Fp16Patch, {24, 16, 3, 1, 1, true}, 2, 19, 21, true, false},
      {ConvVariant::Fp16Patch, {64, 16, 3, 1, 1, true}, 1, 7, 6, true, true},
      {ConvVariant::Bf16Patch, {40, 72, 3, 1, 1, true}, 1, 17, 12, false, false},
      {ConvVariant::Fp16Patch, {16, 32, 3, 2, 1, true}, 2, 37, 35, true, false},
      {ConvVariant::Bf16Patch, {64, 72, 3, 2, 1, true}, 1, 15, 9, false, true},
      // Even planes smaller than a tile, whose pixel pairs stop at the plane's end: an H100 build wrote one
      // pair past it (into the next channel, past the last channel's end: the window's neighbours here).
      {ConvVariant::Fp16, {128, 128, 3, 2, 1, true}, 2, 8, 8, false, true},
      {ConvVariant::Fp16, {64, 128, 1, 1, 1, true}, 2, 4, 4, true, false},
      {ConvVariant::Bf16Patch, {64, 64, 3, 1, 1, true}, 2, 2, 2, true, true},
  };
  auto backend = make_backend(backend_name, test::embedded_context());
  NnKernels kernels(*backend);
  for (const EpilogueCase& c : cases) {
    const Conv2dShape& s = c.shape;
    INFO(backend_name << " " << conv_variant_name(c.variant) << " " << s.c_in << "->" << s.c_out << " k"
                      << s.kernel << " s" << s.stride << " residual " << c.residual);
    EpilogueRun run(*backend, kernels, c, 17);
    SlicedBuffer pre(*backend, c.batch, s.c_out, EpilogueRun::plane_out(c), 3, 1);
    pre.poison();
    run.op.run(c.batch, c.h, c.w, run.in.view(), run.out.view(), run.residual_view(), run.splitk.as<float>(),
               pre.view());
    Conv2dShape linear = s;
    linear.silu = false;
    const Tolerance tol = epilogue_tolerance(c.variant);
    const Conv2dInputs& in = run.inputs;
    EpilogueRun::require(
        {make_check("out", run.dims(c), run.out.download_window(),
                    conv2d_reference(s, c.batch, c.h, c.w, in.in, in.weight, in.bias, run.residual_host),
                    tol),
         make_check("pre", run.dims(c), pre.download_window(),
                    conv2d_reference(linear, c.batch, c.h, c.w, in.in, in.weight, in.bias, {}), tol),
         run.out.untouched_check("out_neighbours"), pre.untouched_check("pre_neighbours")});
  }
}

}  // namespace

TEST_CASE("every conv variant writes the pre-activation beside its output when asked", "[nn]") {
  check_pre_activation_outputs("cpu");
}

TEST_CASE("every conv variant writes the pre-activation beside its output on cuda", "[nn][gpu]") {
  LAB_REQUIRE_GPU_OR_SKIP();
  check_pre_activation_outputs("cuda");
}

TEST_CASE("every conv variant multiplies by SiLU's derivative at a gate when asked", "[nn]") {
  // The input gradient's conv applying its producer's SiLU backward: out = (conv(x) + b) * silu'(gate)
  // (+ residual) through channel windows of poisoned buffers, against float64 (the conv's float64 sums times
  // the derivative in float64); split-K applies it in conv2d_splitk_reduce. A gate on a conv with SiLU or a
  // pre-activation output, or on v4_tf32 (which training never runs), is refused.
  const EpilogueCase cases[] = {
      {ConvVariant::Direct, {12, 9, 3, 1, 3, false}, 2, 7, 8, true, false},
      {ConvVariant::Tiled, {16, 24, 3, 1, 1, false}, 2, 9, 11, false, false},
      {ConvVariant::Tiled, {64, 16, 3, 1, 1, false}, 1, 7, 6, true, true},
      {ConvVariant::Depthwise, {8, 8, 3, 1, 8, false}, 2, 13, 35, false, false},
      {ConvVariant::Depthwise, {8, 8, 5, 1, 8, false}, 1, 9, 10, true, false},
      {ConvVariant::Fp16, {32, 24, 1, 1, 1, false}, 2, 9, 8, false, false},
      {ConvVariant::Fp16, {24, 16, 3, 1, 1, false}, 2, 9, 7, true, false},
      {ConvVariant::Fp16, {64, 16, 3, 1, 1, false}, 1, 7, 6, false, true},
      {ConvVariant::Bf16, {32, 24, 3, 1, 1, false}, 1, 12, 10, false, true},
      {ConvVariant::Fp16Patch, {8, 40, 3, 1, 1, false}, 2, 11, 18, true, false},
      {ConvVariant::Fp16Patch, {64, 32, 3, 1, 1, false}, 1, 9, 8, false, true},
      {ConvVariant::Bf16Patch, {16, 16, 3, 1, 1, false}, 1, 16, 33, true, false},
      {ConvVariant::Fp16Patch, {32, 24, 3, 2, 1, false}, 1, 40, 20, false, false},
  };
  auto backend = make_backend("cpu", test::embedded_context());
  NnKernels kernels(*backend);
  for (const EpilogueCase& c : cases) {
    const Conv2dShape& s = c.shape;
    INFO(conv_variant_name(c.variant)
         << " " << s.c_in << "->" << s.c_out << " k" << s.kernel << " residual " << c.residual);
    EpilogueRun run(*backend, kernels, c, 27);
    SlicedBuffer gate(*backend, c.batch, s.c_out, EpilogueRun::plane_out(c), 2, 1);
    // z of a SiLU layer: wide enough that silu' takes values from about -0.1 to 1.1.
    const std::vector<float> gate_host = random_uniform(run.out.window_elements(), -6.0f, 6.0f, 29);
    gate.upload_window(gate_host);
    run.op.run(c.batch, c.h, c.w, run.in.view(), run.out.view(), run.residual_view(), run.splitk.as<float>(),
               PlaneView{}, gate.view());
    const Conv2dInputs& in = run.inputs;
    std::vector<double> want = conv2d_reference(s, c.batch, c.h, c.w, in.in, in.weight, in.bias, {});
    for (size_t i = 0; i < want.size(); ++i) {
      const double z = gate_host[i], sig = 1.0 / (1.0 + std::exp(-z));
      want[i] *= sig * (1.0 + z * (1.0 - sig));
      if (c.residual) want[i] += run.residual_host[i];
    }
    EpilogueRun::require(
        {make_check("out", run.dims(c), run.out.download_window(), want, epilogue_tolerance(c.variant)),
         run.out.untouched_check("out_neighbours")});
  }
  Conv2dShape with_silu{8, 8, 1, 1, 1, true};
  const Conv2dInputs inputs = conv2d_random_inputs(with_silu, 1, 4, 4, 30);
  const Conv2dOp silu_op(kernels, with_silu, inputs.weight, inputs.bias);
  const DeviceBuffer x = backend->upload_vector(inputs.in);
  DeviceBuffer y = backend->alloc_array<float>(8 * 16);
  CHECK_THROWS_AS(
      silu_op.run(1, 4, 4, dense_view(x.as<const float>(), 8, 16), dense_view(y.as<float>(), 8, 16), {},
                  nullptr, PlaneView{}, dense_view(x.as<const float>(), 8, 16)),
      UsageError);
  Conv2dShape linear = with_silu;
  linear.silu = false;
  const Conv2dOp tf32_op(kernels, linear, inputs.weight, inputs.bias, Precision::Fp32, ConvVariant::Tf32);
  CHECK_THROWS_AS(
      tf32_op.run(1, 4, 4, dense_view(x.as<const float>(), 8, 16), dense_view(y.as<float>(), 8, 16), {},
                  nullptr, PlaneView{}, dense_view(x.as<const float>(), 8, 16)),
      UsageError);
}

TEST_CASE("nn parameter rules are enforced with the rule in the message", "[nn]") {
  const Runner& conv = Registry::instance().get("conv2d");
  CHECK_THROWS_WITH(resolve_params(conv, {{"C_IN", "30"}, {"GROUPS", "4"}}),
                    Catch::Contains("must divide C_IN"));
  CHECK_THROWS_WITH(conv.compile_request("v2_tiled", resolve_params(conv, {{"C_IN", "32"}, {"GROUPS", "4"}})),
                    Catch::Contains("v2_tiled needs groups = 1"));
  CHECK_THROWS_WITH(conv.compile_request("v3_depthwise", resolve_params(conv, {})),
                    Catch::Contains("v3_depthwise needs groups = c_in = c_out"));
  CHECK_THROWS_WITH(conv.compile_request("v2_tiled", resolve_params(conv, {{"K", "7"}})),
                    Catch::Contains("kernel sizes 1, 3, 5"));
  CHECK_THROWS_WITH(conv.compile_request("v4_tf32", resolve_params(conv, {{"C_IN", "32"}, {"GROUPS", "4"}})),
                    Catch::Contains("v4_tf32 needs groups = 1"));
  const Runner& pool = Registry::instance().get("maxpool2d");
  CHECK_THROWS_WITH(resolve_params(pool, {{"K", "4"}}), Catch::Contains("must be odd"));
  const Runner& topk = Registry::instance().get("topk_postprocess");
  CHECK_THROWS_WITH(resolve_params(topk, {{"MAX_DET", "2000"}}), Catch::Contains("at most 1024"));
  CHECK_NOTHROW(resolve_params(topk, {{"MAX_DET", "2000"}, {"A", "500"}}));  // K = A = 500

  auto backend = make_backend("cpu", test::embedded_context());
  NnKernels kernels(*backend);
  CHECK_THROWS_WITH(Conv2dOp(kernels, {4, 8, 3, 1, 1, true}, std::vector<float>(10), std::vector<float>(8)),
                    Catch::Contains("got 10 weights and 8 biases, expected 288 and 8"));
  CHECK_THROWS_AS(MaxPool2dOp(kernels, 4, 2), UsageError);
}

namespace {

std::vector<float> download(Backend& b, const DeviceBuffer& buf) {
  return b.download_vector<float>(buf, buf.bytes() / sizeof(float));
}

void expect_close(const std::vector<float>& out, const std::vector<double>& ref) {
  REQUIRE(out.size() == ref.size());
  for (size_t i = 0; i < out.size(); ++i) {
    INFO("element " << i);
    REQUIRE(out[i] == Approx(ref[i]).margin(1e-5));
  }
}

bool is_poison(float v) {
  uint32_t bits;
  std::memcpy(&bits, &v, sizeof bits);
  return bits == 0xffffffffu;
}

}  // namespace

TEST_CASE("convs write concat slices and detect-head anchor ranges through views", "[nn]") {
  auto backend = make_backend("cpu", test::embedded_context());
  NnKernels kernels(*backend);
  const int batch = 2, h = 6, w = 5, plane = h * w;
  // Source: a dense [2, 12, 6, 5] tensor; the convs read its channel split [4, 12) (C3k2's chunk).
  const std::vector<float> src = random_uniform(size_t(batch) * 12 * plane, -1, 1, 3);
  DeviceBuffer src_d = backend->upload_vector(src);
  std::vector<float> split(size_t(batch) * 8 * plane);
  for (int b = 0; b < batch; ++b)
    std::copy_n(src.begin() + (b * 12 + 4) * plane, 8 * plane, split.begin() + b * 8 * plane);
  const ConstPlaneView split_view = dense_view(src_d.as<const float>(), 12, plane).channels_from(4);

  SECTION("two convs fill adjacent slices of one concat buffer and nothing else") {
    const Conv2dShape s1{8, 3, 3, 1, 1, true}, s2{8, 5, 1, 1, 1, false};
    const auto w1 = random_uniform(size_t(s1.weight_count()), -0.3f, 0.3f, 4),
               b1 = random_uniform(3, -1, 1, 5);
    const auto w2 = random_uniform(size_t(s2.weight_count()), -0.3f, 0.3f, 6),
               b2 = random_uniform(5, -1, 1, 7);
    Conv2dOp conv1(kernels, s1, w1, b1), conv2(kernels, s2, w2, b2);
    DeviceBuffer cat =
        backend->alloc_array<float>(size_t(batch) * 10 * plane);  // [2, 10, 6, 5]: 1 + 3 + 5 + 1
    backend->fill_bytes(cat.get(), 0xff, cat.bytes());
    const PlaneView cat_view = dense_view(cat.as<float>(), 10, plane);
    conv1.run(batch, h, w, split_view, cat_view.channels_from(1));
    conv2.run(batch, h, w, split_view, cat_view.channels_from(4));
    const std::vector<float> out = download(*backend, cat);
    const auto r1 = conv2d_reference(s1, batch, h, w, split, w1, b1, {});
    const auto r2 = conv2d_reference(s2, batch, h, w, split, w2, b2, {});
    for (int b = 0; b < batch; ++b)
      for (int c = 0; c < 10; ++c)
        for (int p = 0; p < plane; ++p) {
          const float v = out[(size_t(b) * 10 + c) * plane + p];
          INFO("b " << b << " c " << c << " p " << p);
          if (c == 0 || c == 9)
            CHECK(is_poison(v));
          else if (c < 4)
            CHECK(v == Approx(r1[(size_t(b) * 3 + c - 1) * plane + p]).margin(1e-5));
          else
            CHECK(v == Approx(r2[(size_t(b) * 5 + c - 4) * plane + p]).margin(1e-5));
        }
  }

  SECTION("a head 1x1 conv writes its level's anchor range of [B, 4, A]") {
    const int anchors = 50, first = 12;  // this level's anchors are [12, 42)
    const Conv2dShape s{8, 4, 1, 1, 1, false};
    const auto wt = random_uniform(size_t(s.weight_count()), -0.3f, 0.3f, 8),
               bias = random_uniform(4, -1, 1, 9);
    Conv2dOp conv(kernels, s, wt, bias);
    DeviceBuffer boxes = backend->alloc_array<float>(size_t(batch) * 4 * anchors);
    backend->fill_bytes(boxes.get(), 0xff, boxes.bytes());
    conv.run(batch, h, w, split_view, PlaneView{boxes.as<float>() + first, 4 * anchors, anchors});
    const std::vector<float> out = download(*backend, boxes);
    const auto ref = conv2d_reference(s, batch, h, w, split, wt, bias, {});
    std::vector<float> level;
    std::vector<double> level_ref;
    for (int b = 0; b < batch; ++b)
      for (int c = 0; c < 4; ++c)
        for (int a = 0; a < anchors; ++a) {
          const float v = out[(size_t(b) * 4 + c) * anchors + a];
          if (a < first || a >= first + plane) {
            CHECK(is_poison(v));
          } else {
            level.push_back(v);
            level_ref.push_back(ref[(size_t(b) * 4 + c) * plane + a - first]);
          }
        }
    expect_close(level, level_ref);
  }
}

TEST_CASE("the nn and top-k kernels compile for sm_90 without spills", "[nn]") {
  std::vector<CompileRequest> requests = nn_module_requests();
  requests.push_back(CompileRequest{"detect/topk_postprocess.cu", {}, {"topk_anchor_keys", "topk_select"}});
  for (const CompileRequest& request : requests) test::check_compiles_for_sm90_without_spills(request);
}

TEST_CASE("conv2d v5_fp16 and v6_bf16 stage 1x1 inputs at aligned, unaligned and strided views", "[nn]") {
  // conv2d_mma's 1x1 staging loads a row's 4-pixel quad as one float4 where the view keeps it 16-byte
  // aligned and a pixel at a time elsewhere. The runner's input is a channel window of a NaN-poisoned buffer
  // (an over-read shows): aligned planes (16 x 16; 20 x 20 with a partial pixel tile and a 33-row reduction's
  // partial chunk), an unaligned one (19 x 17), stride 2 (its pixels walked across output rows), a split
  // reduction, and the three channel tiles.
  auto backend = make_backend("cpu", test::embedded_context());
  const std::vector<Params> shapes = {
      {{"C_IN", "64"}, {"C_OUT", "64"}, {"H", "16"}, {"W", "16"}, {"K", "1"}},
      {{"B", "2"},
       {"C_IN", "33"},
       {"C_OUT", "32"},
       {"H", "20"},
       {"W", "20"},
       {"K", "1"},
       {"RESIDUAL", "true"}},
      {{"C_IN", "24"}, {"C_OUT", "16"}, {"H", "19"}, {"W", "17"}, {"K", "1"}, {"SILU", "false"}},
      {{"C_IN", "24"}, {"C_OUT", "40"}, {"H", "19"}, {"W", "17"}, {"K", "1"}, {"STRIDE", "2"}},
      {{"C_IN", "300"}, {"C_OUT", "72"}, {"H", "8"}, {"W", "4"}, {"K", "1"}},
  };
  for (const std::string variant : {"v5_fp16", "v6_bf16"})
    for (const Params& p : shapes) run_runner(*backend, "conv2d", variant, p);
}
