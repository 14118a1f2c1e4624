// The NHWC layer kernels (kernels/nn/nhwc_layers.cu through NhwcLayerOps): every runner against its float64
// reference on the cpu emulator at odd sizes (partial 8-channel groups, input and output slices with offsets
// inside wider pitches, batch > 1, fp16, bf16, tf32 and f32), each output written again after poisoning and
// the elements around the output slice untouched; the op's one-line refusals; and the same cases plus
// yolo26n's shapes on the H200.
#include <catch2/catch.hpp>

#include "kernels/nn/nhwc_layers_op.hpp"
#include "kernels/runner.hpp"
#include "nvrtc_runtime/errors.hpp"
#include "tests/test_helpers.hpp"

using namespace lab;
using Catch::Matchers::Contains;

namespace {

// Runs a runner twice (the second time after poisoning its outputs) and requires every check to pass.
void run_layer(Backend& backend, const std::string& name, const Params& given) {
  const Runner& r = Registry::instance().get(name);
  const Params p = resolve_params(r, given);
  auto inst = r.instantiate(backend, "v1_vec8", p, 7);
  for (int round = 0; round < 2; ++round) {
    if (round) inst->poison();
    inst->launch();
    for (auto& c : inst->check(std::nullopt)) {
      std::string shape;
      for (const auto& [key, value] : p) shape += key + "=" + value + " ";
      INFO(backend.name() << " " << name << " " << shape << c.output << " rel_l2=" << c.metrics.rel_l2
                          << " max_abs=" << c.metrics.max_abs << " non_finite=" << c.metrics.non_finite);
      CHECK(c.pass);
    }
  }
}

// The small cases both backends run: every entry at odd sizes, in every element type.
void run_small_cases(Backend& backend) {
  for (const char* dtype : {"f16", "bf16", "tf32", "f32"}) {
    // The stem input, batch 2, into a pitch of 8 and into channels [8, 16) of 24.
    run_layer(backend, "nhwc_pack_input", {{"B", "2"}, {"H", "13"}, {"W", "11"}, {"DTYPE", dtype}});
    run_layer(backend, "nhwc_pack_input",
              {{"H", "7"}, {"W", "9"}, {"OUT_OFFSET", "8"}, {"OUT_PITCH", "24"}, {"DTYPE", dtype}});
    // Depthwise: 13 channels (a partial group) at 9x7, batch 2, SiLU + residual, from a slice into a slice.
    run_layer(backend, "nhwc_depthwise3x3",
              {{"B", "2"},
               {"C", "13"},
               {"H", "9"},
               {"W", "7"},
               {"RESIDUAL", "true"},
               {"IN_OFFSET", "8"},
               {"IN_PITCH", "32"},
               {"OUT_OFFSET", "16"},
               {"OUT_PITCH", "40"},
               {"DTYPE", dtype}});
    // Depthwise: 136 channels (17 groups), no SiLU, 1-pixel-wide and 1-pixel-high planes.
    run_layer(
        backend, "nhwc_depthwise3x3",
        {{"C", "136"}, {"H", "5"}, {"W", "1"}, {"SILU", "false"}, {"OUT_PITCH", "144"}, {"DTYPE", dtype}});
    run_layer(backend, "nhwc_depthwise3x3", {{"C", "8"}, {"H", "1"}, {"W", "6"}, {"DTYPE", dtype}});
    // Max pool: SPPF's k5 on 40 channels at 13x11 into a concatenation slice, batch 2; k3 and a k9 window
    // wider than the plane, partial groups.
    run_layer(backend, "nhwc_maxpool",
              {{"B", "2"},
               {"C", "40"},
               {"H", "13"},
               {"W", "11"},
               {"OUT_OFFSET", "40"},
               {"OUT_PITCH", "160"},
               {"DTYPE", dtype}});
    run_layer(backend, "nhwc_maxpool",
              {{"C", "21"},
               {"H", "7"},
               {"W", "10"},
               {"K", "3"},
               {"IN_OFFSET", "16"},
               {"IN_PITCH", "40"},
               {"DTYPE", dtype}});
    run_layer(backend, "nhwc_maxpool", {{"C", "9"}, {"H", "4"}, {"W", "6"}, {"K", "9"}, {"DTYPE", dtype}});
    // Upsample into the upper part of a concatenation, batch 3, from a slice.
    run_layer(backend, "nhwc_upsample2x",
              {{"B", "3"},
               {"C", "24"},
               {"H", "5"},
               {"W", "7"},
               {"IN_OFFSET", "8"},
               {"IN_PITCH", "40"},
               {"OUT_OFFSET", "16"},
               {"OUT_PITCH", "56"},
               {"DTYPE", dtype}});
    run_layer(backend, "nhwc_upsample2x", {{"C", "131"}, {"H", "3"}, {"W", "4"}, {"DTYPE", dtype}});
    // Copy: a slice of one concatenation into another, batch 2, 67 channels.
    run_layer(backend, "nhwc_copy",
              {{"B", "2"},
               {"C", "67"},
               {"H", "6"},
               {"W", "5"},
               {"IN_OFFSET", "24"},
               {"IN_PITCH", "96"},
               {"OUT_OFFSET", "8"},
               {"OUT_PITCH", "80"},
               {"DTYPE", dtype}});
    // To planes: the box branch's 4 channels and 80 classes of a level inside a wider anchor range.
    run_layer(backend, "nhwc_to_planes",
              {{"B", "2"},
               {"C", "4"},
               {"H", "7"},
               {"W", "9"},
               {"FIRST", "11"},
               {"ANCHORS", "80"},
               {"DTYPE", dtype}});
    run_layer(backend, "nhwc_to_planes",
              {{"C", "80"},
               {"H", "5"},
               {"W", "3"},
               {"FIRST", "0"},
               {"IN_OFFSET", "8"},
               {"IN_PITCH", "96"},
               {"DTYPE", dtype}});
  }
}

}  // namespace

TEST_CASE("nhwc layer kernels match their references on the cpu backend", "[nhwc_layers]") {
  auto backend = make_backend("cpu", test::embedded_context());
  run_small_cases(*backend);
}

TEST_CASE("nhwc layer ops refuse bad views and sizes with one line naming the op", "[nhwc_layers]") {
  auto backend = make_backend("cpu", test::embedded_context());
  const NhwcLayerOps ops(*backend, ActivationType::f16);
  DeviceBuffer buffer = backend->upload_vector(std::vector<uint16_t>(64 * 64, 0));
  uint16_t* data = buffer.as<uint16_t>();
  const NhwcView good{data, 16};
  CHECK_THROWS_WITH(ops.maxpool(1, 4, 4, 16, 4, good, good), Contains("nhwc maxpool") && Contains("odd"));
  CHECK_THROWS_WITH(ops.copy(16, 16, {data, 12}, good), Contains("nhwc copy") && Contains("pitch 12"));
  CHECK_THROWS_WITH(ops.copy(16, 24, good, good), Contains("nhwc copy") && Contains("24 channels"));
  CHECK_THROWS_WITH(ops.upsample2x(1, 2, 2, 8, good, {data + 4, 16}),
                    Contains("nhwc upsample2x") && Contains("16-byte aligned"));
  const NhwcDepthwise depthwise(ops, 8, std::vector<float>(8 * 9), std::vector<float>(8), true);
  CHECK_THROWS_WITH(depthwise.run(1, 0, 4, good, good),
                    Contains("nhwc depthwise3x3") && Contains("bad size"));
  CHECK_THROWS_WITH(depthwise.run(1, 4, 4, good, good, {data, 4}),
                    Contains("nhwc depthwise3x3") && Contains("residual pitch 4"));
  CHECK_THROWS_WITH(ops.pack_input(1, 4, 4, nullptr, good), Contains("nhwc pack_input"));
  CHECK_THROWS_WITH(ops.to_planes(1, 16, 8, good, reinterpret_cast<float*>(data), 20, 5),
                    Contains("nhwc to_planes") && Contains("20 anchors"));
  CHECK_THROWS_WITH(NhwcDepthwise(ops, 8, std::vector<float>(8 * 9 - 1), std::vector<float>(8), true),
                    Contains("nhwc depthwise3x3") && Contains("71 weights"));
}

TEST_CASE("nhwc layer kernels match their references on the cuda backend", "[nhwc_layers][gpu]") {
  LAB_REQUIRE_GPU_OR_SKIP();
  auto backend = make_backend("cuda", test::embedded_context());
  run_small_cases(*backend);
  // yolo26n's shapes: the 640x640 input at batch 2, a DWConv, SPPF's pool into its concatenation, the neck's
  // upsample into a concatenation, and the P3 class outputs into the 8400 anchors.
  for (const char* dtype : {"f16", "bf16", "tf32", "f32"}) {
    run_layer(*backend, "nhwc_pack_input", {{"B", "2"}, {"H", "640"}, {"W", "640"}, {"DTYPE", dtype}});
    run_layer(*backend, "nhwc_depthwise3x3",
              {{"B", "2"}, {"C", "64"}, {"H", "80"}, {"W", "80"}, {"SILU", "false"}, {"DTYPE", dtype}});
    run_layer(*backend, "nhwc_maxpool",
              {{"C", "128"},
               {"H", "20"},
               {"W", "20"},
               {"OUT_OFFSET", "128"},
               {"OUT_PITCH", "512"},
               {"DTYPE", dtype}});
    run_layer(*backend, "nhwc_upsample2x",
              {{"B", "2"}, {"C", "256"}, {"H", "20"}, {"W", "20"}, {"OUT_PITCH", "384"}, {"DTYPE", dtype}});
    run_layer(*backend, "nhwc_copy",
              {{"B", "2"},
               {"C", "64"},
               {"H", "80"},
               {"W", "80"},
               {"OUT_OFFSET", "64"},
               {"OUT_PITCH", "128"},
               {"DTYPE", dtype}});
    run_layer(*backend, "nhwc_to_planes",
              {{"B", "2"},
               {"C", "80"},
               {"H", "80"},
               {"W", "80"},
               {"FIRST", "0"},
               {"ANCHORS", "8400"},
               {"DTYPE", dtype}});
  }
}
