// The Hopper NHWC convolution (conv2d_nhwc, kernels/nn/conv2d_nhwc.cu): against the float64 reference on the
// cpu emulator (its wgmma, im2col / tiled TMA and mbarrier models) at small shapes and on the H200 at
// yolo26n's real ones, every output element written again after poisoning and the channels around the output
// slice untouched; its split-K mode (against the reference, bitwise repeatable) and the rule that picks it;
// the shapes it refuses; its persistent grid; and its NVRTC build for sm_90a is HGMMA fed by TMA with 16-byte
// epilogue stores, without local memory, in registers that fit its CTAs per SM.
#include <catch2/catch.hpp>

#include <algorithm>
#include <string>

#include "kernels/compare.hpp"
#include "kernels/nn/conv2d_nhwc_op.hpp"
#include "kernels/nn/conv2d_nhwc_params.cuh"
#include "kernels/runner.hpp"
#include "nvrtc_runtime/cuda_compiler.hpp"
#include "tests/scoped_env.hpp"
#include "tests/test_helpers.hpp"

using namespace lab;
using Catch::Matchers::Contains;

namespace {

// Runs conv2d_nhwc twice (the second time after poisoning its output) and requires every check to pass.
void run_nhwc(Backend& backend, const Params& given) {
  const Runner& r = Registry::instance().get("conv2d_nhwc");
  const Params p = resolve_params(r, given);
  auto inst = r.instantiate(backend, "wgmma", p, 5);
  for (int round = 0; round < 2; ++round) {
    if (round) inst->poison();
    inst->launch();
    for (auto& c : inst->check(std::nullopt)) {
      INFO(backend.name() << " K" << p.at("K") << " s" << p.at("STRIDE") << " " << p.at("C_IN") << "->"
                          << p.at("C_OUT") << " at " << p.at("H") << "x" << p.at("W") << " B" << p.at("B")
                          << " " << p.at("DTYPE") << " " << c.output << " rel_l2=" << c.metrics.rel_l2
                          << " max_abs=" << c.metrics.max_abs << " non_finite=" << c.metrics.non_finite);
      CHECK(c.pass);
    }
  }
}

// Split-K at S CTAs a tile: 3x3 with 18 steps (S 8 leaves slices of 2 and 3), + residual, fp16 and bf16;
// 1x1 with 3 steps (S 2: 1 + 2) into a channel slice; 3x3 stride 2 across two images, more tiles than one.
void run_split_k(Backend& backend) {
  for (const char* s : {"1", "2", "3", "4", "8"})
    for (const char* dtype : {"f16", "bf16"})
      run_nhwc(backend, {{"C_IN", "72"},
                         {"C_OUT", "144"},
                         {"H", "7"},
                         {"W", "9"},
                         {"RESIDUAL", "true"},
                         {"DTYPE", dtype},
                         {"SPLIT_K", s}});
  for (const char* s : {"2", "3"})
    run_nhwc(backend, {{"C_IN", "136"},
                       {"C_OUT", "48"},
                       {"H", "5"},
                       {"W", "6"},
                       {"K", "1"},
                       {"OUT_OFFSET", "8"},
                       {"OUT_PITCH", "64"},
                       {"DTYPE", "bf16"},
                       {"SPLIT_K", s}});
  run_nhwc(backend, {{"B", "2"},
                     {"C_IN", "32"},
                     {"C_OUT", "64"},
                     {"H", "13"},
                     {"W", "11"},
                     {"STRIDE", "2"},
                     {"SILU", "false"},
                     {"SPLIT_K", "4"}});
}

// Runs Conv2dNhwcOp at `splits` over one seeded input `runs` times (the same workspace) and returns each
// run's output bytes.
std::vector<std::vector<uint16_t>> split_k_outputs(Backend& backend, int splits, int runs) {
  Conv2dShape s;
  s.c_in = 96, s.c_out = 160, s.kernel = 3;
  const int batch = 1, h = 12, w = 10;
  const size_t in_count = size_t(batch) * h * w * s.c_in, out_count = size_t(batch) * h * w * s.c_out;
  const std::vector<float> weight = random_uniform(size_t(s.weight_count()), -0.1f, 0.1f, 7);
  const std::vector<float> bias = random_uniform(size_t(s.c_out), -0.5f, 0.5f, 8);
  const Conv2dNhwcOp op(backend, s, ActivationType::f16, weight, bias);
  DeviceBuffer in =
      backend.upload_vector(to_half_bits(random_uniform(in_count, -1.0f, 1.0f, 9), HalfType::f16));
  DeviceBuffer out = backend.alloc_array<uint16_t>(out_count);
  const Conv2dNhwcSplitSizes sizes = op.split_sizes(batch, h, w, splits);
  DeviceBuffer partial = backend.alloc_array<float>(sizes.partial_floats + 4);
  DeviceBuffer arrivals = backend.upload_vector(std::vector<unsigned>(sizes.arrivals + 1, 0u));
  const Conv2dNhwcSplitK split{splits, partial.as<float>(), arrivals.as<unsigned>()};
  std::vector<std::vector<uint16_t>> outputs;
  for (int r = 0; r < runs; ++r) {
    op.run(batch, h, w, {in.as<uint16_t>(), s.c_in}, {out.as<uint16_t>(), s.c_out}, {}, 0, split);
    outputs.push_back(backend.download_vector<uint16_t>(out, out_count));
  }
  return outputs;
}

void check_split_k_deterministic(Backend& backend) {
  const auto outputs = split_k_outputs(backend, 8, 3);  // 18 steps: slices of 2 and 3; 2 x 2 tiles
  CHECK(outputs[1] == outputs[0]);
  CHECK(outputs[2] == outputs[0]);
  CHECK(std::any_of(outputs[0].begin(), outputs[0].end(), [](uint16_t b) { return b != 0; }));
}

// A conv2d_nhwc run at auto BLOCK_N and the channel tile conv2d_nhwc_block_n picks for it on the backend.
struct AutoBlockNCase {
  Params params;
  int block_n;
};

// For each case: requires that Conv2dNhwcOp at auto BN takes the expected channel tile for the run, then runs
// conv2d_nhwc (at auto BLOCK_N, as the network builds its convs) against the reference.
void run_auto_block_n(Backend& backend, const std::vector<AutoBlockNCase>& cases) {
  for (const AutoBlockNCase& c : cases) {
    const Params p = resolve_params(Registry::instance().get("conv2d_nhwc"), c.params);
    Conv2dShape s;
    s.c_in = int(param_int(p, "C_IN")), s.c_out = int(param_int(p, "C_OUT"));
    s.kernel = int(param_int(p, "K")), s.stride = int(param_int(p, "STRIDE"));
    const Conv2dNhwcOp op(backend, s, parse_activation_type(param_str(p, "DTYPE")),
                          std::vector<float>(size_t(s.weight_count()), 0.0f),
                          std::vector<float>(size_t(s.c_out), 0.0f));
    INFO(s.c_in << "->" << s.c_out << " K" << s.kernel << " at " << p.at("H") << "x" << p.at("W") << " B"
                << p.at("B") << " on " << backend.device().multiprocessors << " SMs");
    REQUIRE(op.block_n(int(param_int(p, "B")), int(param_int(p, "H")), int(param_int(p, "W"))) == c.block_n);
    run_nhwc(backend, c.params);
  }
}

}  // namespace

TEST_CASE("conv2d_nhwc matches the reference on the cpu backend", "[conv2d_nhwc]") {
  auto backend = make_backend("cpu", test::embedded_context());
  for (const char* dtype : {"f16", "bf16"}) {
    // 3x3 stride 1 over three M tiles (the last partial, crossing an image boundary).
    run_nhwc(*backend,
             {{"B", "2"}, {"C_IN", "16"}, {"C_OUT", "32"}, {"H", "12"}, {"W", "11"}, {"DTYPE", dtype}});
    // The stem: 3 channels in a pitch of 8 (the 5 beyond hold NaN), stride 2 at odd sizes.
    run_nhwc(*backend,
             {{"C_IN", "3"}, {"C_OUT", "16"}, {"H", "17"}, {"W", "15"}, {"STRIDE", "2"}, {"DTYPE", dtype}});
  }
  // Stride 2 into a channel slice [16, 80) of a 96-channel buffer, no SiLU.
  run_nhwc(*backend, {{"C_IN", "32"},
                      {"C_OUT", "64"},
                      {"H", "10"},
                      {"W", "9"},
                      {"STRIDE", "2"},
                      {"SILU", "false"},
                      {"OUT_OFFSET", "16"},
                      {"OUT_PITCH", "96"}});
  // 3x3 with two channel blocks (72 = 64 + 8): 18 steps wrap the 4-slot ring; + residual.
  run_nhwc(
      *backend,
      {{"C_IN", "72"}, {"C_OUT", "16"}, {"H", "7"}, {"W", "6"}, {"RESIDUAL", "true"}, {"DTYPE", "bf16"}});
  // 1x1: a partial channel block and a partial N tile, batch 2, + residual.
  run_nhwc(*backend, {{"B", "2"},
                      {"C_IN", "40"},
                      {"C_OUT", "48"},
                      {"H", "9"},
                      {"W", "9"},
                      {"K", "1"},
                      {"RESIDUAL", "true"}});
  // The 64-pixel tile (one consumer warpgroup): 3x3 stride 1 and 2 across images, 1x1 into a slice.
  run_nhwc(*backend, {{"B", "2"},
                      {"C_IN", "24"},
                      {"C_OUT", "40"},
                      {"H", "9"},
                      {"W", "10"},
                      {"BLOCK_M", "64"},
                      {"RESIDUAL", "true"}});
  run_nhwc(*backend, {{"B", "2"},
                      {"C_IN", "64"},
                      {"C_OUT", "32"},
                      {"H", "11"},
                      {"W", "13"},
                      {"STRIDE", "2"},
                      {"BLOCK_M", "64"},
                      {"DTYPE", "bf16"}});
  run_nhwc(*backend, {{"C_IN", "48"},
                      {"C_OUT", "144"},
                      {"H", "9"},
                      {"W", "9"},
                      {"K", "1"},
                      {"BLOCK_M", "64"},
                      {"OUT_OFFSET", "8"},
                      {"OUT_PITCH", "160"}});
  // 1x1: input read from a wider buffer (pitch 152), two N tiles of 128, three channel blocks.
  run_nhwc(*backend,
           {{"C_IN", "136"}, {"C_OUT", "136"}, {"H", "5"}, {"W", "5"}, {"K", "1"}, {"IN_PITCH", "152"}});
}

// conv2d_nhwc on float activations, DTYPE tf32 (tf32 values stored, tf32 products) and f32 (3xTF32 products,
// A_lo written by the consumers): every row width of the swizzle (BK 8, 16, 32 floats, 32 to 128 bytes; f32's
// 32 in 3 stages), several channel blocks, both pixel tiles, slices, a residual and split-K.
void run_float(Backend& backend) {
  for (const char* dtype : {"tf32", "f32"}) {
    auto with = [&](Params p) {
      p["DTYPE"] = dtype;
      run_nhwc(backend, p);
    };
    // The stem's shape: 3 channels (BK 8) in a pitch of 8, stride 2 at odd sizes.
    with({{"C_IN", "3"}, {"C_OUT", "16"}, {"H", "17"}, {"W", "15"}, {"STRIDE", "2"}});
    // BK 16 (64-byte rows), two images, the last M tile partial.
    with({{"B", "2"}, {"C_IN", "16"}, {"C_OUT", "32"}, {"H", "12"}, {"W", "11"}});
    // BK 32 (128-byte rows): 72 = 32 + 32 + 8 channels, 27 steps around the ring (4 or 3 slots); + residual.
    with({{"C_IN", "72"}, {"C_OUT", "48"}, {"H", "7"}, {"W", "6"}, {"RESIDUAL", "true"}});
    // 1x1 from a wider input (pitch 152) into the slice [8, 144) of 160, two N tiles, BLOCK_M 64.
    with({{"C_IN", "136"},
          {"C_OUT", "136"},
          {"H", "5"},
          {"W", "6"},
          {"K", "1"},
          {"IN_PITCH", "152"},
          {"OUT_OFFSET", "8"},
          {"OUT_PITCH", "160"},
          {"BLOCK_M", "64"}});
    // Stride 2 across images, no SiLU, and split-K over 3 CTAs a tile.
    with({{"B", "2"},
          {"C_IN", "32"},
          {"C_OUT", "64"},
          {"H", "10"},
          {"W", "9"},
          {"STRIDE", "2"},
          {"SILU", "false"}});
    with({{"C_IN", "72"}, {"C_OUT", "144"}, {"H", "7"}, {"W", "9"}, {"RESIDUAL", "true"}, {"SPLIT_K", "3"}});
  }
}

TEST_CASE("conv2d_nhwc on float activations (tf32, f32) matches the reference on the cpu backend",
          "[conv2d_nhwc]") {
  auto backend = make_backend("cpu", test::embedded_context());
  run_float(*backend);
}

TEST_CASE(
    "conv2d_nhwc on float activations (tf32, f32) matches the reference on the GPU, at yolo26n's shapes too",
    "[conv2d_nhwc][gpu]") {
  LAB_REQUIRE_GPU_OR_SKIP();
  auto backend = make_backend("cuda", test::embedded_context());
  run_float(*backend);
  for (const char* dtype : {"tf32", "f32"}) {
    run_nhwc(*backend,
             {{"C_IN", "256"}, {"C_OUT", "256"}, {"H", "20"}, {"W", "20"}, {"K", "1"}, {"DTYPE", dtype}});
    run_nhwc(*backend, {{"B", "4"},
                        {"C_IN", "64"},
                        {"C_OUT", "64"},
                        {"H", "80"},
                        {"W", "80"},
                        {"RESIDUAL", "true"},
                        {"DTYPE", dtype}});
    run_nhwc(
        *backend,
        {{"C_IN", "128"}, {"C_OUT", "128"}, {"H", "40"}, {"W", "40"}, {"STRIDE", "2"}, {"DTYPE", dtype}});
  }
}

TEST_CASE("conv2d_nhwc's persistent CTAs walk several tiles each on the cpu backend", "[conv2d_nhwc]") {
  auto backend = make_backend("cpu", test::embedded_context());
  const int sms = backend->device().multiprocessors;
  // 1x1 32->32 in 64-pixel tiles, one reduction step a tile, four 8 x 8n images: about three tiles a CTA, so
  // the ring's phases run on across tile boundaries and the producer loads ahead into the next tile.
  const int n = std::min(256, 9 * sms / 4 + 1);
  REQUIRE(conv2d_nhwc_grid(4 * n, 32, 64, sms) < 4 * n);
  run_nhwc(*backend, {{"B", "4"},
                      {"C_IN", "32"},
                      {"C_OUT", "32"},
                      {"H", "8"},
                      {"W", std::to_string(8 * n)},
                      {"K", "1"},
                      {"BLOCK_M", "64"},
                      {"RESIDUAL", "true"}});
  // 3x3 16->144 at 16 x 8m in 128-pixel tiles x two N tiles (2m tiles), nine steps a tile, bf16.
  const int m = std::min(256, sms + 1);
  REQUIRE(conv2d_nhwc_grid(2 * m, 128, 128, sms) < 2 * m);
  run_nhwc(*backend, {{"C_IN", "16"},
                      {"C_OUT", "144"},
                      {"H", "16"},
                      {"W", std::to_string(8 * m)},
                      {"BLOCK_M", "128"},
                      {"DTYPE", "bf16"}});
}

TEST_CASE("conv2d_nhwc's split-K matches the reference at S 1, 2, 3, 4 and 8 on the cpu backend",
          "[conv2d_nhwc]") {
  auto backend = make_backend("cpu", test::embedded_context());
  run_split_k(*backend);
}

TEST_CASE("conv2d_nhwc's split-K gives the same bits every run on the cpu backend (slices summed in order)",
          "[conv2d_nhwc]") {
  auto backend = make_backend("cpu", test::embedded_context());
  check_split_k_deterministic(*backend);
}

TEST_CASE("conv2d_nhwc's split-K and BLOCK_N match the reference, split-K repeats its bits, on the GPU",
          "[conv2d_nhwc][gpu]") {
  LAB_REQUIRE_GPU_OR_SKIP();
  auto backend = make_backend("cuda", test::embedded_context());
  run_split_k(*backend);
  check_split_k_deterministic(*backend);
  // yolo26n's batch-1 20x20 convs as the rule splits them: the 1x1 256->256 (S 2; also in BN 64), the 3x3
  // 128->128 (S 8).
  for (const char* s : {"1", "2", "4"})
    for (const char* bn : {"auto", "64"})
      run_nhwc(*backend, {{"C_IN", "256"},
                          {"C_OUT", "256"},
                          {"H", "20"},
                          {"W", "20"},
                          {"K", "1"},
                          {"BLOCK_N", bn},
                          {"SPLIT_K", s}});
  for (const char* s : {"4", "8"})
    run_nhwc(*backend, {{"C_IN", "128"},
                        {"C_OUT", "128"},
                        {"H", "20"},
                        {"W", "20"},
                        {"RESIDUAL", "true"},
                        {"DTYPE", "bf16"},
                        {"SPLIT_K", s}});
}

TEST_CASE("conv2d_nhwc runs a smaller channel tile on request (BLOCK_N), whole or split, on the cpu backend",
          "[conv2d_nhwc]") {
  auto backend = make_backend("cpu", test::embedded_context());
  // 1x1 136->144 in BN 64: three N tiles, the last partial.
  run_nhwc(*backend,
           {{"C_IN", "136"}, {"C_OUT", "144"}, {"H", "5"}, {"W", "6"}, {"K", "1"}, {"BLOCK_N", "64"}});
  // 3x3 72->48 + residual in BN 16 (three N tiles), split 3 ways, bf16.
  run_nhwc(*backend, {{"C_IN", "72"},
                      {"C_OUT", "48"},
                      {"H", "7"},
                      {"W", "6"},
                      {"RESIDUAL", "true"},
                      {"DTYPE", "bf16"},
                      {"BLOCK_N", "16"},
                      {"SPLIT_K", "3"}});
}

TEST_CASE(
    "conv2d_nhwc at auto BN runs 64-channel tiles where 128 would leave SMs idle, and 128 where they fill "
    "them, on the cpu backend (8 threads)",
    "[conv2d_nhwc]") {
  const test::ScopedEnv threads("LAB_CPU_THREADS", "8");
  auto backend = make_backend("cpu", test::embedded_context());
  REQUIRE(backend->device().multiprocessors == 8);
  run_auto_block_n(
      *backend,
      {// 1x1 136->144 at 5x6: 2 tiles of BN 128 (BLOCK_M 64) -> BN 64, three N tiles (the last partial).
       {{{"C_IN", "136"}, {"C_OUT", "144"}, {"H", "5"}, {"W", "6"}, {"K", "1"}}, 64},
       // 3x3 72->144 at 7x9 + residual, bf16 (two channel blocks, 18 steps).
       {{{"C_IN", "72"}, {"C_OUT", "144"}, {"H", "7"}, {"W", "9"}, {"RESIDUAL", "true"}, {"DTYPE", "bf16"}},
        64},
       // 3x3 stride 2 32->136 at 10x9 into channels [8, 144) of 152, no SiLU.
       {{{"C_IN", "32"},
         {"C_OUT", "136"},
         {"H", "10"},
         {"W", "9"},
         {"STRIDE", "2"},
         {"SILU", "false"},
         {"OUT_OFFSET", "8"},
         {"OUT_PITCH", "152"}},
        64},
       // 1x1 16->144 at 16x16, batch 2: 4 x 2 tiles of 128 x 128 fill the 8 SMs -> BN 128.
       {{{"B", "2"}, {"C_IN", "16"}, {"C_OUT", "144"}, {"H", "16"}, {"W", "16"}, {"K", "1"}}, 128}});
}

TEST_CASE("conv2d_nhwc at auto BN matches the reference on the GPU (BN 64 at batch 1, 128 at 32)",
          "[conv2d_nhwc][gpu]") {
  LAB_REQUIRE_GPU_OR_SKIP();
  auto backend = make_backend("cuda", test::embedded_context());
  // The expected tiles hold from 15 SMs (the 20x20 convs' 14 BN-128 tiles leave some idle) to 200 (batch
  // 32's 200 fill them); the H200 has 132.
  const int sms = backend->device().multiprocessors;
  REQUIRE((sms >= 15 && sms <= 200));
  run_auto_block_n(
      *backend,
      {// yolo26n's 20x20 level at batch 1: 1x1 256->256 (7 x 2 tiles of 64 x 128), fp16 and bf16.
       {{{"C_IN", "256"}, {"C_OUT", "256"}, {"H", "20"}, {"W", "20"}, {"K", "1"}}, 64},
       {{{"C_IN", "256"}, {"C_OUT", "256"}, {"H", "20"}, {"W", "20"}, {"K", "1"}, {"DTYPE", "bf16"}}, 64},
       // 3x3 128->128 + residual, bf16; the 40x40 level's 3x3 stride 2 into a concatenation slice.
       {{{"C_IN", "128"},
         {"C_OUT", "128"},
         {"H", "20"},
         {"W", "20"},
         {"RESIDUAL", "true"},
         {"DTYPE", "bf16"}},
        64},
       {{{"C_IN", "128"},
         {"C_OUT", "128"},
         {"H", "40"},
         {"W", "40"},
         {"STRIDE", "2"},
         {"OUT_OFFSET", "128"},
         {"OUT_PITCH", "384"}},
        64},
       // Batch 32 at 20x20: 100 x 2 tiles of 128 x 128.
       {{{"B", "32"}, {"C_IN", "256"}, {"C_OUT", "256"}, {"H", "20"}, {"W", "20"}, {"K", "1"}}, 128}});
}

TEST_CASE(
    "conv2d_nhwc's channel-tile rule: BN 64 where BN 128's tiles number fewer than the SMs (yolo26n at batch "
    "1), 128 where they fill them (batch 32)",
    "[conv2d_nhwc]") {
  // Batch 1 on 132 SMs. 20x20 (400 pixels): 1x1 / 3x3 -> 256 has 7 x 2 tiles of 64 x 128; -> 128, 7.
  CHECK(conv2d_nhwc_block_n(400, 256, 132) == 64);
  CHECK(conv2d_nhwc_block_n(400, 128, 132) == 64);
  CHECK(conv2d_nhwc_block_m(400, 256, 132, 64) == 64);  // then 7 x 4 tiles of 64 x 64
  // 40x40 (1600): -> 128 has 25 tiles of 64 x 128, -> 256 50.
  CHECK(conv2d_nhwc_block_n(1600, 128, 132) == 64);
  CHECK(conv2d_nhwc_block_n(1600, 256, 132) == 64);
  CHECK(conv2d_nhwc_block_m(1600, 128, 132, 64) == 64);  // 13 x 2 tiles of 128 pixels would not fill
  // 80x80 (6400): -> 128 (C3k2 cv2, the head's class conv) 100 tiles of 64 x 128; -> 64 keeps its own BN.
  CHECK(conv2d_nhwc_block_n(6400, 128, 132) == 64);
  CHECK(conv2d_nhwc_block_n(6400, 80, 132) == 64);
  CHECK(conv2d_nhwc_block_n(6400, 64, 132) == 64);
  CHECK(conv2d_nhwc_block_n(400, 32, 132) == 32);
  CHECK(conv2d_nhwc_block_n(6400, 16, 132) == 16);
  // Batch 32: 20x20 (12800) -> 256: 100 x 2 tiles of 128 x 128; -> 128: 200 of 64 x 128; 40x40, 80x80 more.
  CHECK(conv2d_nhwc_block_n(32 * 400, 256, 132) == 128);
  CHECK(conv2d_nhwc_block_n(32 * 400, 128, 132) == 128);
  CHECK(conv2d_nhwc_block_n(32 * 1600, 128, 132) == 128);
  CHECK(conv2d_nhwc_block_n(32 * 1600, 256, 132) == 128);
  CHECK(conv2d_nhwc_block_n(32 * 6400, 128, 132) == 128);
  // The threshold: 132 tiles of 64 x 128 fill 132 SMs, 131 do not.
  CHECK(conv2d_nhwc_block_n(64 * 132, 128, 132) == 128);
  CHECK(conv2d_nhwc_block_n(64 * 131, 128, 132) == 64);
}

TEST_CASE("conv2d_nhwc splits the reduction where its tiles leave SMs idle, within the limit and the steps",
          "[conv2d_nhwc]") {
  const auto shape = [](int c_in, int c_out, int kernel) {
    Conv2dShape s;
    s.c_in = c_in, s.c_out = c_out, s.kernel = kernel;
    return s;
  };
  const int limit = kConv2dNhwcSplitRule.max_splits;
  CHECK(conv2d_nhwc_steps(ActivationType::f16, shape(256, 256, 1)) == 4);
  CHECK(conv2d_nhwc_steps(ActivationType::f16, shape(72, 16, 3)) == 18);
  // 20x20 at batch 1: 1x1 256->256, 14 tiles, 4 steps (2 a slice at least): S 2.
  CHECK(conv2d_nhwc_split_k(ActivationType::f16, 400, shape(256, 256, 1), 132, limit) == 2);
  // 3x3 128->128: 7 tiles, 18 steps: S 8 (the limit); 16 would leave slices of one step.
  CHECK(conv2d_nhwc_split_k(ActivationType::f16, 400, shape(128, 128, 3), 132, limit) == 8);
  CHECK(conv2d_nhwc_split_k(ActivationType::f16, 400, shape(128, 128, 3), 132, 16) == 8);
  // 40x40 3x3 64->64: 25 tiles: S 4 (100 CTAs; 200 would not fit 132 SMs).
  CHECK(conv2d_nhwc_split_k(ActivationType::f16, 1600, shape(64, 64, 3), 132, limit) == 4);
  // 80x80 (100 tiles), batch 32, a one-step 1x1, the limit 1: no split.
  CHECK(conv2d_nhwc_split_k(ActivationType::f16, 6400, shape(64, 64, 3), 132, limit) == 1);
  CHECK(conv2d_nhwc_split_k(ActivationType::f16, 32 * 400, shape(128, 128, 3), 132, limit) == 1);
  CHECK(conv2d_nhwc_split_k(ActivationType::f16, 400, shape(64, 64, 1), 132, limit) == 1);
  CHECK(conv2d_nhwc_split_k(ActivationType::f16, 400, shape(128, 128, 3), 132, 1) == 1);
  CHECK(conv2d_nhwc_split_k(ActivationType::f16, 400, shape(128, 128, 3), 132, 2) == 2);
  // BN 64 doubles the 1x1 256->256's tiles (28): still S 2; the 3x3 128->128's (14): S 8.
  CHECK(conv2d_nhwc_split_k(ActivationType::f16, 400, shape(256, 256, 1), 132, limit, 64) == 2);
  CHECK(conv2d_nhwc_split_k(ActivationType::f16, 400, shape(128, 128, 3), 132, limit, 64) == 8);
  CHECK(conv2d_nhwc_split_k(ActivationType::f16, 1600, shape(128, 128, 3), 132, limit, 64) == 2);  // 50 tiles
}

TEST_CASE("conv2d_nhwc refuses the shapes it does not run with its rule", "[conv2d_nhwc]") {
  const Runner& r = Registry::instance().get("conv2d_nhwc");
  CHECK_THROWS_WITH(resolve_params(r, {{"K", "1"}, {"STRIDE", "2"}}), Contains("a 1x1 conv has stride 1"));
  CHECK_THROWS_WITH(resolve_params(r, {{"C_OUT", "12"}}), Contains("C_OUT"));
  CHECK_THROWS_WITH(resolve_params(r, {{"K", "5"}}), Contains("K"));
  CHECK_THROWS_WITH(resolve_params(r, {{"OUT_OFFSET", "8"}, {"OUT_PITCH", "64"}}),
                    Contains("below OUT_OFFSET + C_OUT"));
  CHECK_THROWS_WITH(resolve_params(r, {{"C_IN", "40"}, {"IN_PITCH", "32"}}), Contains("below C_IN=40"));
  CHECK_THROWS_WITH(resolve_params(r, {{"IN_PITCH", "36"}}), Contains("IN_PITCH"));
  // Split-K: at most one slice a reduction step (1x1 40->48: one step), and at BLOCK_M 64.
  CHECK_THROWS_WITH(resolve_params(r, {{"K", "1"}, {"C_IN", "40"}, {"C_OUT", "48"}, {"SPLIT_K", "2"}}),
                    Contains("above the 1 reduction steps"));
  CHECK_THROWS_WITH(resolve_params(r, {{"SPLIT_K", "2"}, {"BLOCK_M", "128"}}), Contains("BLOCK_M 64"));
  CHECK_THROWS_WITH(resolve_params(r, {{"SPLIT_K", "65"}}), Contains("SPLIT_K"));
}

TEST_CASE("conv2d_nhwc takes 64-pixel tiles where 128 would leave SMs idle", "[conv2d_nhwc]") {
  CHECK(conv2d_nhwc_block_m(400, 256, 132) == 64);        // P5 at batch 1: 4 x 2 CTAs of 128
  CHECK(conv2d_nhwc_block_m(6400, 64, 132) == 64);        // 50 CTAs of 128
  CHECK(conv2d_nhwc_block_m(32 * 6400, 64, 132) == 128);  // batch 32
  CHECK(conv2d_nhwc_block_m(128 * 66, 256, 132) == 128);  // exactly 132 CTAs of 128
  CHECK(conv2d_nhwc_block_m(128 * 66 - 128, 256, 132) == 64);
  CHECK(conv2d_nhwc_block_m(128 * 33, 256, 132, 64) == 128);  // BN 64: 33 x 4 tiles of 128
}

TEST_CASE("conv2d_nhwc launches as many persistent CTAs as the SMs hold, at most one a tile",
          "[conv2d_nhwc]") {
  CHECK(conv2d_nhwc_ctas_per_sm(16, 2) == 2);
  CHECK(conv2d_nhwc_ctas_per_sm(64, 2) == 2);
  CHECK(conv2d_nhwc_ctas_per_sm(128, 2) == 1);
  CHECK(conv2d_nhwc_ctas_per_sm(32, 1) == 3);
  CHECK(conv2d_nhwc_ctas_per_sm(128, 1) == 2);
  CHECK(conv2d_nhwc_grid(6400, 32, 128, 132) == 264);  // 32->32 1x1 at 160x160, batch 32: 24 tiles a CTA
  CHECK(conv2d_nhwc_grid(6400, 128, 128, 132) == 132);
  CHECK(conv2d_nhwc_grid(50, 64, 64, 132) == 50);  // fewer tiles than the SMs hold
  CHECK(conv2d_nhwc_grid(1000, 16, 64, 132) == 396);
}

TEST_CASE("conv2d_nhwc picks its tiles from the channel counts", "[conv2d_nhwc]") {
  struct Case {
    ActivationType type;
    int c_in, c_out, block_n;
    Conv2dNhwcTiles tiles;  // bn, bk, stages
  };
  // 16-bit rows of 16, 32 or 64 channels; float rows of 8, 16 or 32; f32's four operand tiles (3xTF32) take 3
  // stages of 128-byte rows.
  const Case cases[] = {{ActivationType::f16, 3, 16, 0, {16, 16, 4}},
                        {ActivationType::f16, 32, 24, 0, {32, 32, 4}},
                        {ActivationType::f16, 48, 64, 0, {64, 64, 4}},
                        {ActivationType::f16, 256, 256, 0, {128, 64, 4}},
                        {ActivationType::f16, 256, 256, 64, {64, 64, 4}},  // BLOCK_N
                        {ActivationType::tf32, 16, 64, 0, {64, 16, 4}},
                        {ActivationType::tf32, 256, 256, 0, {128, 32, 4}},
                        {ActivationType::f32, 8, 64, 0, {64, 8, 4}},
                        {ActivationType::f32, 16, 64, 0, {64, 16, 4}},
                        {ActivationType::f32, 256, 256, 0, {128, 32, 3}}};
  for (const Case& c : cases) {
    CAPTURE(activation_type_name(c.type), c.c_in, c.c_out, c.block_n);
    const Conv2dNhwcTiles t = conv2d_nhwc_tiles(c.type, c.c_in, c.c_out, c.block_n);
    CHECK(t.bn == c.tiles.bn);
    CHECK(t.bk == c.tiles.bk);
    CHECK(t.stages == c.tiles.stages);
  }
  CHECK(conv2d_nhwc_shared_bytes(128, 128, 128, 2, 3) <= 227u * 1024);  // the SM's most for one CTA
}

TEST_CASE(
    "conv2d_nhwc compiles with NVRTC for sm_90a to HGMMA fed by TMA, unserialised, without local memory",
    "[conv2d_nhwc]") {
  const RuntimeContext ctx = test::embedded_context();
  for (int kernel : {1, 3})
    for (int c : {16, 64, 256}) {
      Conv2dShape s;
      s.c_in = c, s.c_out = c, s.kernel = kernel;
      INFO("K " << kernel << " C " << c);
      const CompileResult r = compile_with_nvrtc(
          *ctx.tree, *ctx.cache, conv2d_nhwc_compile_request(ActivationType::f16, s), "sm_90");
      CHECK(r.target == "sm_90a");
      const std::string sass = disassemble_sass(r);
      CHECK_THAT(sass, Contains("HGMMA.64x"));
      CHECK_THAT(sass, Contains(kernel == 1 ? "UTMALDG.2D" : "UTMALDG.4D.IM2COL"));
      CHECK_THAT(sass, Contains("UTMALDG.3D"));
      CHECK_THAT(sass, Contains("USETMAXREG"));
      CHECK_THAT(sass, Contains("STG.E.128"));  // the epilogue's 16-byte stores
      CHECK_THAT(sass, !Contains("LDL") && !Contains("STL"));
      // ptxas serialises every wgmma when one sits where it cannot prove warpgroup convergence (C7520).
      CHECK_THAT(r.log, !Contains("serialized"));
      // The instances: both pixel tiles, the split-K one for reductions of 2 steps or more, and at C 256 (the
      // tile rule's BN 128) both pixel tiles at the narrow BN 64 too.
      const bool split = conv2d_nhwc_steps(ActivationType::f16, s) >= 2,
                 narrow = c > kConv2dNhwcBlockNRule.narrow_bn;
      REQUIRE(r.resources.size() == 2u + (split ? 1u : 0u) + (narrow ? 2u : 0u));
      const auto registers_of = [&r](const std::string& instance) -> std::optional<int> {
        const auto it = std::find_if(r.resources.begin(), r.resources.end(),
                                     [&](const ResourceUsage& k) { return k.kernel == instance; });
        return it == r.resources.end() ? std::nullopt : it->registers;
      };
      // Each instance's registers let conv2d_nhwc_ctas_per_sm CTAs share an SM (the persistent grid's size).
      std::vector<int> bns{conv2d_nhwc_tiles(ActivationType::f16, s.c_in, s.c_out).bn};
      if (narrow) bns.push_back(kConv2dNhwcBlockNRule.narrow_bn);
      for (int bn : bns)
        for (int consumers : {1, 2}) {
          const std::string instance = conv2d_nhwc_instance(ActivationType::f16, s, 64 * consumers, bn);
          const std::optional<int> registers = registers_of(instance);
          REQUIRE(registers);
          INFO(instance << ": " << *registers << " registers");
          CHECK(*registers * 128 * (1 + consumers) * conv2d_nhwc_ctas_per_sm(bn, consumers) <= 65536);
          // setmaxnreg moves registers within the CTA's launch allocation: the producer's 40 and the
          // consumers' 2 x 232 (at 168) or 2 x 96 (at 80) fit only when ptxas allocates exactly that many.
          if (consumers == 2) CHECK(*registers == (conv2d_nhwc_ctas_per_sm(bn, 2) == 1 ? 168 : 80));
        }
      // The split-K instance: its counter's atomic, and registers for the CTAs an SM holds.
      if (split) {
        CHECK_THAT(sass, Contains("ATOMG"));
        const std::optional<int> registers =
            registers_of(conv2d_nhwc_splitk_instance(ActivationType::f16, s));
        REQUIRE(registers);
        CHECK(*registers * 256 * conv2d_nhwc_splitk_ctas_per_sm() <= 65536);
      }
    }
}
