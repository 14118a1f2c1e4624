// The Hopper NHWC convolution (conv2d_nhwc, kernels/nn/conv2d_nhwc.cu): against the float64 reference on the
// cpu emulator (its wgmma, im2col / tiled TMA and mbarrier models) at small shapes and on the H200 at
// yolo26n's real ones, every output element written again after poisoning and the channels around the output
// slice untouched; the shapes it refuses; its persistent grid; and its NVRTC build for sm_90a is HGMMA fed by
// TMA with 16-byte epilogue stores, without local memory, in registers that fit its CTAs per SM.
#include <catch2/catch.hpp>

#include <algorithm>
#include <string>

#include "kernels/nn/conv2d_nhwc_op.hpp"
#include "kernels/nn/conv2d_nhwc_params.cuh"
#include "kernels/runner.hpp"
#include "nvrtc_runtime/cuda_compiler.hpp"
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

TEST_CASE("conv2d_nhwc refuses the shapes it does not run with its rule", "[conv2d_nhwc]") {
  const Runner& r = Registry::instance().get("conv2d_nhwc");
  CHECK_THROWS_WITH(resolve_params(r, {{"K", "1"}, {"STRIDE", "2"}}), Contains("a 1x1 conv has stride 1"));
  CHECK_THROWS_WITH(resolve_params(r, {{"C_OUT", "12"}}), Contains("C_OUT"));
  CHECK_THROWS_WITH(resolve_params(r, {{"K", "5"}}), Contains("K"));
  CHECK_THROWS_WITH(resolve_params(r, {{"OUT_OFFSET", "8"}, {"OUT_PITCH", "64"}}),
                    Contains("below OUT_OFFSET + C_OUT"));
  CHECK_THROWS_WITH(resolve_params(r, {{"C_IN", "40"}, {"IN_PITCH", "32"}}), Contains("below C_IN=40"));
  CHECK_THROWS_WITH(resolve_params(r, {{"IN_PITCH", "36"}}), Contains("IN_PITCH"));
}

TEST_CASE("conv2d_nhwc takes 64-pixel tiles where 128 would leave SMs idle", "[conv2d_nhwc]") {
  CHECK(conv2d_nhwc_block_m(400, 256, 132) == 64);        // P5 at batch 1: 4 x 2 CTAs of 128
  CHECK(conv2d_nhwc_block_m(6400, 64, 132) == 64);        // 50 CTAs of 128
  CHECK(conv2d_nhwc_block_m(32 * 6400, 64, 132) == 128);  // batch 32
  CHECK(conv2d_nhwc_block_m(128 * 66, 256, 132) == 128);  // exactly 132 CTAs of 128
  CHECK(conv2d_nhwc_block_m(128 * 66 - 128, 256, 132) == 64);
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
  CHECK(conv2d_nhwc_tiles(3, 16).bn == 16);
  CHECK(conv2d_nhwc_tiles(3, 16).bk == 16);
  CHECK(conv2d_nhwc_tiles(32, 24).bn == 32);
  CHECK(conv2d_nhwc_tiles(32, 24).bk == 32);
  CHECK(conv2d_nhwc_tiles(48, 64).bn == 64);
  CHECK(conv2d_nhwc_tiles(48, 64).bk == 64);
  CHECK(conv2d_nhwc_tiles(256, 256).bn == 128);
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
      const CompileResult r =
          compile_with_nvrtc(*ctx.tree, *ctx.cache, conv2d_nhwc_compile_request(HalfType::f16, s), "sm_90");
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
      // Each instance's registers let conv2d_nhwc_ctas_per_sm CTAs share an SM (the persistent grid's size).
      const Conv2dNhwcTiles t = conv2d_nhwc_tiles(s.c_in, s.c_out);
      for (int consumers : {1, 2}) {
        const std::optional<int> registers = r.resources.at(size_t(consumers - 1)).registers;
        REQUIRE(registers);
        INFO(r.resources[size_t(consumers - 1)].kernel << ": " << *registers << " registers");
        CHECK(*registers * 128 * (1 + consumers) * conv2d_nhwc_ctas_per_sm(t.bn, consumers) <= 65536);
        // setmaxnreg moves registers within the CTA's launch allocation: the producer's 40 and the consumers'
        // 2 x 232 (at 168) or 2 x 96 (at 80) fit only when ptxas allocates exactly that many.
        if (consumers == 2) CHECK(*registers == (conv2d_nhwc_ctas_per_sm(t.bn, 2) == 1 ? 168 : 80));
      }
    }
}
