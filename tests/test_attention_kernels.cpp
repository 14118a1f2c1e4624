// Attention and PSA kernels on both backends: every runner and variant against its reference (the scenario
// files cover the shapes; these pin the essentials), re-poisoned second launches, unwritten (poisoned)
// outputs failing their check, and parameter validation.
#include <catch2/catch.hpp>

#include <map>

#include "kernels/attention/psa_half_op.hpp"
#include "kernels/runner.hpp"
#include "tests/test_helpers.hpp"

using namespace lab;

namespace {

void run_all_variants(const std::string& backend_name, const std::string& runner, const Params& given) {
  auto backend = make_backend(backend_name, test::embedded_context());
  const Runner& r = Registry::instance().get(runner);
  const Params p = resolve_params(r, given);
  for (const auto& variant : r.variants()) {
    if (!variant_refusal(r.spec(), variant.name, p).empty()) continue;  // e.g. wgmma at HEAD_DIM 32
    auto inst = r.instantiate(*backend, variant.name, p, 11);
    for (int round = 0; round < 2; ++round) {  // the second round proves every element is written again
      if (round) inst->poison();
      inst->launch();
      for (auto& c : inst->check(std::nullopt)) {
        INFO(backend_name << " " << runner << " " << variant.name << " " << c.output
                          << " rel_l2=" << c.metrics.rel_l2 << " max_abs=" << c.metrics.max_abs
                          << " non_finite=" << c.metrics.non_finite);
        CHECK(c.pass);
      }
    }
  }
}

const Params kRagged{{"BH", "2"}, {"N_CTX_Q", "70"}, {"N_CTX_K", "45"}, {"HEAD_DIM", "32"}};
Params ragged_half(const char* dtype) {
  return {{"BH", "2"}, {"N_CTX_Q", "70"}, {"N_CTX_K", "45"}, {"HEAD_DIM", "32"}, {"DTYPE", dtype}};
}
const Params kPsa{{"B", "1"}, {"NUM_HEADS", "2"}, {"KEY_DIM", "16"}, {"H", "5"}, {"W", "7"}};

// psa_attention_half's NHWC layout (qkv of pitch C + 8 with NaN padding, x and v into a channel slice of
// pitch C + 16 whose other channels must keep their poison: the runner's x_neighbours / v_neighbours) in fp16
// and bf16: yolo26n's P5 shape (1 x 2 heads x 400 tokens x KEY_DIM 32), an odd token count (301 = 7 x 43,
// not a multiple of the 16-row CTA) at B 3, KEY_DIM 16 with 3 heads (the 8-byte row pieces), and 600 tokens
// (38 key tiles: warps with two steps, the second's loads issued after the first's products); and
// psa_attention_tf32_nhwc, the same layout in float, on the same shapes.
void check_psa_nhwc(const std::string& backend_name) {
  const std::vector<Params> shapes{
      {{"B", "1"}, {"NUM_HEADS", "2"}, {"KEY_DIM", "32"}, {"H", "20"}, {"W", "20"}},
      {{"B", "3"}, {"NUM_HEADS", "2"}, {"KEY_DIM", "32"}, {"H", "7"}, {"W", "43"}},
      {{"B", "2"}, {"NUM_HEADS", "3"}, {"KEY_DIM", "16"}, {"H", "5"}, {"W", "7"}},
      {{"B", "1"}, {"NUM_HEADS", "1"}, {"KEY_DIM", "32"}, {"H", "24"}, {"W", "25"}}};
  for (Params p : shapes) {
    for (const char* dtype : {"tf32", "f32"}) {  // the float twins (the tf32 and fp32 networks')
      Params f = p;
      f["DTYPE"] = dtype;
      run_all_variants(backend_name, "psa_attention_tf32_nhwc", f);
    }
    for (const char* dtype : {"f16", "bf16"}) {
      p["DTYPE"] = dtype;
      p["LAYOUT"] = "nhwc";
      run_all_variants(backend_name, "psa_attention_half", p);
    }
  }
}

}  // namespace

TEST_CASE("flash attention kernels match the reference on the cpu backend", "[attention]") {
  run_all_variants("cpu", "flash_attn2_fwd", kRagged);
  run_all_variants("cpu", "flash_attn2_bwd", kRagged);
  run_all_variants(
      "cpu", "attn_probs",
      {{"BH", "2"}, {"N_CTX_Q", "30"}, {"N_CTX_K", "70"}, {"HEAD_DIM", "16"}, {"HEAD", "1"}, {"ROWS", "3"}});
}

TEST_CASE("fp16 and bf16 flash attention kernels match the reference on the cpu backend", "[attention]") {
  for (const char* dtype : {"f16", "bf16"}) {
    run_all_variants("cpu", "flash_attn2_fwd_half", ragged_half(dtype));
    run_all_variants("cpu", "flash_attn2_bwd_half", ragged_half(dtype));
  }
}

TEST_CASE("flash attention kernels at HEAD_DIM 256 match the reference on the cpu backend", "[attention]") {
  // Small: the emulator runs a 256-wide tile slowly. Nk = 17 leaves a partial key tile in every variant.
  const Params p{{"BH", "2"}, {"N_CTX_Q", "20"}, {"N_CTX_K", "17"}, {"HEAD_DIM", "256"}};
  for (const char* runner :
       {"flash_attn2_fwd", "flash_attn2_bwd", "flash_attn2_bwd_dq", "flash_attn2_bwd_dkdv"})
    run_all_variants("cpu", runner, p);
  run_all_variants("cpu", "attn_probs",
                   {{"BH", "1"}, {"N_CTX_Q", "9"}, {"N_CTX_K", "20"}, {"HEAD_DIM", "256"}});
  for (const char* dtype : {"f16", "bf16"}) {
    Params half = p;
    half["DTYPE"] = dtype;
    for (const char* runner : {"flash_attn2_fwd_half", "flash_attn2_bwd_half", "flash_attn2_bwd_dq_half",
                               "flash_attn2_bwd_dkdv_half"})
      run_all_variants("cpu", runner, half);
  }
}

TEST_CASE("fp16 and bf16 attention outputs never written fail their check as NaN", "[attention]") {
  auto backend = make_backend("cpu", test::embedded_context());
  for (const char* runner : {"flash_attn2_fwd_half", "flash_attn2_bwd_half"})
    for (const char* dtype : {"f16", "bf16"}) {
      const Runner& r = Registry::instance().get(runner);
      auto inst = r.instantiate(*backend, resolve_variant(r, ""), resolve_params(r, ragged_half(dtype)), 11);
      for (auto& c : inst->check(std::nullopt)) {
        INFO(runner << " " << dtype << " " << c.output);
        CHECK_FALSE(c.pass);
        CHECK(c.metrics.non_finite == c.metrics.count);
      }
    }
}

TEST_CASE("psa_attention_half and _tf32_nhwc on NHWC views match the reference on the cpu backend",
          "[attention][psa_nhwc]") {
  check_psa_nhwc("cpu");
}

TEST_CASE("psa_attention_half and _tf32_nhwc on NHWC views match the reference on the cuda backend",
          "[attention][psa_nhwc][gpu]") {
  LAB_REQUIRE_GPU_OR_SKIP();
  check_psa_nhwc("cuda");
}

TEST_CASE("PsaHalfOp::forward_nhwc refuses views the kernel cannot read, before launching",
          "[attention][psa_nhwc]") {
  auto cpu = make_backend("cpu", test::embedded_context());
  const PsaHalfOp op(*cpu, "mma", HalfType::f16, PsaDims{1, 2, 32, 35, 0});  // qkv 256 channels, x and v 128
  DeviceBuffer qkv = cpu->alloc_array<uint16_t>(35 * 264), out = cpu->alloc_array<uint16_t>(35 * 136);
  DeviceBuffer lse = cpu->alloc_array<float>(2 * 35);
  const uint16_t* in = qkv.as<const uint16_t>();
  uint16_t* x = out.as<uint16_t>();
  CHECK_THROWS_WITH(
      op.forward_nhwc(in, 260, x, 136, x, 136, lse.as<float>()),
      "psa_attention_half_nhwc: the qkv pitch 260 is not a multiple of 8 of at least its 256 channels");
  CHECK_THROWS_WITH(
      op.forward_nhwc(in, 264, x, 120, x, 136, lse.as<float>()),
      "psa_attention_half_nhwc: the merged pitch 120 is not a multiple of 8 of at least its 128 channels");
  CHECK_THROWS_WITH(
      op.forward_nhwc(in, 264, x, 136, x + 4, 136, lse.as<float>()),
      "psa_attention_half_nhwc: the v_out tensor is not 16-byte aligned (a channel offset not a "
      "multiple of 8?)");
  CHECK_THROWS_WITH(PsaHalfOp(*cpu, "wgmma", HalfType::f16, PsaDims{1, 2, 32, 35, 0}),
                    "the 16-bit PSA attention has no variant 'wgmma' (mma, mma_w16, mma_staged)");
  const PsaHalfOp staged(*cpu, "mma_staged", HalfType::f16, PsaDims{1, 2, 32, 35, 0});
  CHECK_THROWS_WITH(staged.forward(in, x, x, lse.as<float>()),
                    "variant mma_staged of the 16-bit PSA attention reads NHWC views only (forward_nhwc)");
  CHECK_THROWS_WITH(
      PsaHalfOp(*cpu, "mma_staged", HalfType::f16, PsaDims{1, 2, 32, 1025, 0}),
      "variant mma_staged of the 16-bit PSA attention stages a head's keys in shared memory: at "
      "most 1024 tokens (got 1025)");
}

TEST_CASE("PSA kernels match the reference on the cpu backend", "[attention]") {
  for (const char* r :
       {"psa_pack_qkv", "psa_extract_v", "psa_merge_attn", "psa_attention", "psa_attention_bwd"})
    run_all_variants("cpu", r, kPsa);
  // KEY_DIM 32 (yolo26's): the 16-bit composed variants (mma_fp16, mma_bf16) run there, not at 16.
  Params key_dim_32 = kPsa;
  key_dim_32["KEY_DIM"] = "32";
  for (const char* r : {"psa_attention", "psa_attention_bwd"}) run_all_variants("cpu", r, key_dim_32);
  for (const char* dtype : {"f16", "bf16"}) {
    Params half = kPsa;
    half["DTYPE"] = dtype;
    run_all_variants("cpu", "psa_attention_half", half);
  }
}

namespace {

// The rel_l2 of each output of one launch of `variant` of `runner`.
std::map<std::string, double> psa_rel_l2(const std::string& backend_name, const std::string& runner,
                                         const std::string& variant, const Params& given) {
  auto backend = make_backend(backend_name, test::embedded_context());
  const Runner& r = Registry::instance().get(runner);
  auto inst = r.instantiate(*backend, variant, resolve_params(r, given), 11);
  inst->launch();
  std::map<std::string, double> rel_l2;
  for (auto& c : inst->check(std::nullopt)) {
    INFO(backend_name << " " << runner << " " << variant << " " << c.output << " rel_l2=" << c.metrics.rel_l2
                      << " max_abs=" << c.metrics.max_abs);
    CHECK(c.pass);
    rel_l2[c.output] = c.metrics.rel_l2;
  }
  return rel_l2;
}

// The tensor-core PSA forwards' accuracy against the float64 formula at KEY_DIM 32 on a 10 x 10 map (N 100:
// not a multiple of the 16-row CTA nor of a warp's key range) and at KEY_DIM 16 on 5 x 7.
void check_psa_tensor_core_accuracy(const std::string& backend_name) {
  for (const char* kd : {"16", "32"}) {
    const Params p = std::string(kd) == "32" ? Params{{"KEY_DIM", "32"}, {"H", "10"}, {"W", "10"}} : kPsa;
    // 3xTF32 keeps float32 accuracy: measured rel_l2 of x 1.8e-7 (KD 16) and 2.4e-7 (KD 32) on the emulator,
    // `fused` (plain float FMAs) 1.9e-7 and 2.9e-7 on the same inputs; a plain tf32 product per term would be
    // off by ~1e-4.
    for (const char* variant : {"fused_tc", "fused_tc_w16"}) {
      const std::map<std::string, double> tc = psa_rel_l2(backend_name, "psa_attention", variant, p);
      CHECK(tc.at("x") < 1e-6);
      CHECK(tc.at("L") < 1e-6);
    }
    // 16-bit: measured rel_l2 of x 0.47u-0.48u (fp16, u = 2^-11; bf16, u = 2^-8), as flash_attn2_fwd_half;
    // the same bound for both variants (mma_w16 only merges more partial states).
    for (const char* variant : {"mma", "mma_w16"})
      for (const char* dtype : {"f16", "bf16"}) {
        Params half = p;
        half["DTYPE"] = dtype;
        const double u = std::string(dtype) == "f16" ? 0x1p-11 : 0x1p-8;
        const std::map<std::string, double> h = psa_rel_l2(backend_name, "psa_attention_half", variant, half);
        CHECK(h.at("x") < u);
      }
  }
}

}  // namespace

TEST_CASE("the tensor-core PSA forwards keep float32 (3xTF32) and 16-bit accuracy on the cpu backend",
          "[attention]") {
  check_psa_tensor_core_accuracy("cpu");
}

TEST_CASE("the tensor-core PSA forwards keep float32 (3xTF32) and 16-bit accuracy on the cuda backend",
          "[attention][gpu]") {
  LAB_REQUIRE_GPU_OR_SKIP();
  check_psa_tensor_core_accuracy("cuda");
}

TEST_CASE("attention kernels match the reference on the cuda backend", "[attention][gpu]") {
  LAB_REQUIRE_GPU_OR_SKIP();
  for (const char* d : {"16", "32", "64", "128", "256"}) {
    Params p{{"BH", "3"}, {"N_CTX_Q", "300"}, {"N_CTX_K", "211"}, {"HEAD_DIM", d}};
    run_all_variants("cuda", "flash_attn2_fwd", p);
    run_all_variants("cuda", "flash_attn2_bwd", p);
  }
  run_all_variants("cuda", "attn_probs",
                   {{"BH", "2"}, {"N_CTX_Q", "300"}, {"N_CTX_K", "211"}, {"HEAD_DIM", "256"}});
  for (const char* d : {"32", "64", "128", "256"})
    for (const char* dtype : {"f16", "bf16"}) {
      Params p{{"BH", "3"}, {"N_CTX_Q", "300"}, {"N_CTX_K", "211"}, {"HEAD_DIM", d}, {"DTYPE", dtype}};
      run_all_variants("cuda", "flash_attn2_fwd_half", p);
      run_all_variants("cuda", "flash_attn2_bwd_half", p);
    }
  for (const char* r :
       {"psa_pack_qkv", "psa_extract_v", "psa_merge_attn", "psa_attention", "psa_attention_bwd"})
    run_all_variants("cuda", r, {{"B", "4"}});
  for (const char* dtype : {"f16", "bf16"})
    run_all_variants("cuda", "psa_attention_half", {{"B", "4"}, {"DTYPE", dtype}});
}

TEST_CASE("attention parameters are validated with the rule", "[attention]") {
  const Runner& fwd = Registry::instance().get("flash_attn2_fwd");
  CHECK_THROWS_WITH(resolve_params(fwd, {{"HEAD_DIM", "48"}}), Catch::Contains("power of two"));
  CHECK_THROWS_WITH(resolve_params(fwd, {{"HEAD_DIM", "512"}}), Catch::Contains("[16, 256]"));
  CHECK_THROWS_WITH(resolve_params(fwd, {{"HEAD_DIM", "8"}}), Catch::Contains("[16, 256]"));
  CHECK_THROWS_WITH(resolve_params(fwd, {{"BLOCK_M", "128"}}), Catch::Contains("auto, 16, 32, 64"));
  const Runner& probs = Registry::instance().get("attn_probs");
  CHECK_THROWS_WITH(resolve_params(probs, {{"HEAD", "2"}}), Catch::Contains("must be < BH"));
  const Runner& half = Registry::instance().get("flash_attn2_bwd_half");
  CHECK_THROWS_WITH(resolve_params(half, {{"HEAD_DIM", "16"}}), Catch::Contains("one of 32, 64, 128, 256"));
  CHECK_THROWS_WITH(resolve_params(half, {{"DTYPE", "fp16"}}), Catch::Contains("one of f16, bf16"));
  // Tile shapes: dK/dV takes one m-tile per warp; the fused dQ needs the warps to split the dQ tile.
  CHECK_THROWS_WITH(half.compile_request("mma", resolve_params(half, {{"DKDV_TILE", "4x2x64"}})),
                    Catch::Contains("DKDV_TILE=4x2x64 is invalid"));
  const Params two_warps = resolve_params(half, {{"DKDV_TILE", "2x1x64"}, {"HEAD_DIM", "32"}});
  CHECK_NOTHROW(half.compile_request("mma", two_warps));
  CHECK_THROWS_WITH(half.compile_request("mma_fused_dq", two_warps),
                    Catch::Contains("cannot split a 64 x 32 dQ tile"));
  const Runner& psa = Registry::instance().get("psa_attention");
  CHECK_THROWS_WITH(resolve_params(psa, {{"KEY_DIM", "24"}}), Catch::Contains("power of two"));
  // The fused forward exists for KEY_DIM 16 and 32 only: the variant states its rule before anything
  // compiles.
  auto cpu = make_backend("cpu", test::embedded_context());
  CHECK_THROWS_WITH(
      psa.instantiate(*cpu, "fused", resolve_params(psa, {{"KEY_DIM", "64"}}), 1),
      "variant fused of psa_attention cannot run these parameters: needs KEY_DIM 16 or 32 (got 64)");
  CHECK_THROWS_WITH(
      psa.instantiate(*cpu, "fused_tc", resolve_params(psa, {{"KEY_DIM", "64"}}), 1),
      "variant fused_tc of psa_attention cannot run these parameters: needs KEY_DIM 16 or 32 (got 64)");
  CHECK_THROWS_WITH(
      psa.instantiate(*cpu, "fused_tc_w16", resolve_params(psa, {{"KEY_DIM", "64"}}), 1),
      "variant fused_tc_w16 of psa_attention cannot run these parameters: needs KEY_DIM 16 or 32 (got 64)");
  CHECK_THROWS_WITH(
      psa.instantiate(*cpu, "mma_bf16", resolve_params(psa, {{"KEY_DIM", "16"}}), 1),
      "variant mma_bf16 of psa_attention cannot run these parameters: needs KEY_DIM 32, 64, 128 "
      "or 256 (got 16)");
  const Runner& psa_half = Registry::instance().get("psa_attention_half");
  CHECK_THROWS_WITH(
      psa_half.instantiate(*cpu, "mma", resolve_params(psa_half, {{"KEY_DIM", "64"}}), 1),
      "variant mma of psa_attention_half cannot run these parameters: needs KEY_DIM 16 or 32 (got 64)");
  CHECK_THROWS_WITH(
      psa_half.instantiate(*cpu, "mma_w16", resolve_params(psa_half, {{"KEY_DIM", "64"}}), 1),
      "variant mma_w16 of psa_attention_half cannot run these parameters: needs KEY_DIM 16 or 32 (got 64)");
  CHECK_THROWS_WITH(psa_half.instantiate(*cpu, "mma_staged", resolve_params(psa_half, {}), 1),
                    "variant mma_staged of psa_attention_half cannot run these parameters: reads NHWC views "
                    "only (LAYOUT=nhwc)");
  CHECK_THROWS_WITH(
      psa_half.instantiate(*cpu, "mma_staged",
                           resolve_params(psa_half, {{"LAYOUT", "nhwc"}, {"H", "40"}, {"W", "40"}}), 1),
      "variant mma_staged of psa_attention_half cannot run these parameters: stages a head's keys "
      "in shared memory: at most 1024 tokens (got 1600)");
}
