// The direct stem convolution (conv2d_stem_nhwc, kernels/nn/conv2d_stem_nhwc.cu): float32 NCHW in, NHWC
// 16-bit out, against the float64 reference of the same float values on the cpu emulator at small odd shapes
// and on the H200 at yolo26n's 640x640 stem, every output element written again after poisoning and the
// channels around the output slice untouched; the shapes it refuses; and its NVRTC build stores 16 bytes at a
// time without local memory.
#include <catch2/catch.hpp>

#include "kernels/nn/conv2d_stem_nhwc_op.hpp"
#include "kernels/runner.hpp"
#include "nvrtc_runtime/cuda_compiler.hpp"
#include "nvrtc_runtime/errors.hpp"
#include "tests/test_helpers.hpp"

using namespace lab;
using Catch::Matchers::Contains;

namespace {

// Runs conv2d_stem_nhwc twice (the second time after poisoning its output) and requires every check to pass.
void run_stem(Backend& backend, const Params& given) {
  const Runner& r = Registry::instance().get("conv2d_stem_nhwc");
  const Params p = resolve_params(r, given);
  auto inst = r.instantiate(backend, "direct", p, 7);
  for (int round = 0; round < 2; ++round) {
    if (round) inst->poison();
    inst->launch();
    for (auto& c : inst->check(std::nullopt)) {
      INFO(backend.name() << " 3->" << p.at("C_OUT") << " at " << p.at("H") << "x" << p.at("W") << " B"
                          << p.at("B") << " " << p.at("DTYPE") << " " << c.output
                          << " rel_l2=" << c.metrics.rel_l2 << " max_abs=" << c.metrics.max_abs
                          << " non_finite=" << c.metrics.non_finite);
      CHECK(c.pass);
    }
  }
}

}  // namespace

TEST_CASE("conv2d_stem_nhwc matches the reference on the cpu backend", "[conv2d_stem_nhwc]") {
  auto backend = make_backend("cpu", test::embedded_context());
  for (const char* dtype : {"f16", "bf16", "tf32", "f32"}) {
    // yolo26n's 16 channels at odd sizes (the last row and column see the right / bottom padding), batch 2.
    run_stem(*backend, {{"B", "2"}, {"H", "17"}, {"W", "15"}, {"DTYPE", dtype}});
    // Even sizes, 64 channels (eight 16-byte groups).
    run_stem(*backend, {{"C_OUT", "64"}, {"H", "12"}, {"W", "10"}, {"DTYPE", dtype}});
  }
  // Into the channel slice [8, 40) of a 48-channel buffer, no SiLU, a 1-pixel-high input.
  run_stem(
      *backend,
      {{"C_OUT", "32"}, {"H", "1"}, {"W", "9"}, {"SILU", "false"}, {"OUT_OFFSET", "8"}, {"OUT_PITCH", "48"}});
  // More pixels than a block (128 threads): 300 outputs over three blocks, the last partial.
  run_stem(*backend, {{"C_OUT", "8"}, {"H", "40"}, {"W", "59"}});
}

TEST_CASE("conv2d_stem_nhwc matches the reference on the cuda backend at yolo26n's stem",
          "[conv2d_stem_nhwc][gpu]") {
  LAB_REQUIRE_GPU_OR_SKIP();
  auto backend = make_backend("cuda", test::embedded_context());
  for (const char* dtype : {"f16", "bf16", "tf32", "f32"})
    run_stem(*backend, {{"B", "2"}, {"H", "640"}, {"W", "640"}, {"DTYPE", dtype}});
  run_stem(*backend,
           {{"C_OUT", "64"}, {"H", "333"}, {"W", "417"}, {"OUT_OFFSET", "16"}, {"OUT_PITCH", "96"}});
}

TEST_CASE("conv2d_stem_nhwc refuses the shapes it does not run with its rule", "[conv2d_stem_nhwc]") {
  const Runner& r = Registry::instance().get("conv2d_stem_nhwc");
  CHECK_THROWS_WITH(resolve_params(r, {{"C_OUT", "12"}}), Contains("C_OUT"));
  CHECK_THROWS_WITH(resolve_params(r, {{"C_OUT", "72"}}), Contains("C_OUT"));
  CHECK_THROWS_WITH(resolve_params(r, {{"OUT_OFFSET", "8"}, {"OUT_PITCH", "16"}}),
                    Contains("below OUT_OFFSET + C_OUT"));
  Conv2dShape s;
  s.c_in = 3, s.c_out = 16, s.kernel = 3, s.stride = 2;
  CHECK(conv2d_stem_nhwc_problem(s).empty());
  s.stride = 1;
  CHECK_THAT(conv2d_stem_nhwc_problem(s), Contains("3x3 stride 2 conv of 3 input channels"));
  s.stride = 2, s.c_in = 4;
  CHECK_THAT(conv2d_stem_nhwc_problem(s), Contains("3 input channels"));
  s.c_in = 3, s.c_out = 20;
  CHECK_THAT(conv2d_stem_nhwc_problem(s), Contains("a multiple of 8"));
  auto backend = make_backend("cpu", test::embedded_context());
  s.c_out = 16;
  CHECK_THROWS_WITH(
      Conv2dStemNhwcOp(*backend, s, ActivationType::f16, std::vector<float>(431), std::vector<float>(16)),
      Contains("431 weights"));
  const Conv2dStemNhwcOp op(*backend, s, ActivationType::f16, std::vector<float>(432),
                            std::vector<float>(16));
  DeviceBuffer in = backend->upload_vector(std::vector<float>(3 * 4 * 4));
  DeviceBuffer out = backend->upload_vector(std::vector<uint16_t>(4 * 24));
  CHECK_THROWS_WITH(op.run(1, 4, 4, in.as<const float>(), {out.as<uint16_t>(), 12}),
                    Contains("output pitch 12"));
  CHECK_THROWS_WITH(op.run(1, 4, 4, in.as<const float>(), {out.as<uint16_t>() + 4, 24}),
                    Contains("not 16-byte aligned"));
  CHECK_THROWS_WITH(op.run(1, 4, 4, nullptr, {out.as<uint16_t>(), 16}), Contains("input tensor is not set"));
}

TEST_CASE("conv2d_stem_nhwc compiles with NVRTC to 16-byte stores without local memory",
          "[conv2d_stem_nhwc]") {
  const RuntimeContext ctx = test::embedded_context();
  for (int c_out : {16, 64}) {
    Conv2dShape s;
    s.c_in = 3, s.c_out = c_out, s.kernel = 3, s.stride = 2;
    INFO("C_OUT " << c_out);
    const CompileResult r = compile_with_nvrtc(
        *ctx.tree, *ctx.cache, conv2d_stem_nhwc_compile_request(ActivationType::bf16, s), "sm_90");
    const std::string sass = disassemble_sass(r);
    CHECK_THAT(sass, Contains("STG.E.128"));
    CHECK_THAT(sass, Contains("LDS.128"));
    CHECK_THAT(sass, !Contains("LDL") && !Contains("STL"));
  }
}
