// The Hopper Flash Attention backward (variant `wgmma` of flash_attn2_bwd_half and flash_attn2_bwd_dkdv_half,
// flash_attn_wgmma_bwd.cu): against the float64 reference on the cpu emulator (its wgmma, TMA and mbarrier
// models) and on the H200, every output element written again after poisoning; the dK/dV kernel alone giving
// the whole backward's bits; the HEAD_DIM rule; and its NVRTC build for sm_90a really being HGMMA with TMA,
// vector reductions and no local memory (no GPU needed).
#include <catch2/catch.hpp>

#include <map>

#include "kernels/attention/flash_attn_wgmma_bwd_op.hpp"
#include "kernels/runner.hpp"
#include "nvrtc_runtime/cuda_compiler.hpp"
#include "tests/test_helpers.hpp"

using namespace lab;
using Catch::Matchers::Contains;

namespace {

// Runs the wgmma variant of `runner` twice (the second time after poisoning its outputs), requires every
// check to pass and returns the last launch's checks by output name.
std::map<std::string, OutputCheck> run_wgmma(Backend& backend, const std::string& runner,
                                             const Params& given) {
  const Runner& r = Registry::instance().get(runner);
  const Params p = resolve_params(r, given);
  auto inst = r.instantiate(backend, "wgmma", p, 7);
  std::map<std::string, OutputCheck> checks;
  for (int round = 0; round < 2; ++round) {
    if (round) inst->poison();
    inst->launch();
    for (auto& c : inst->check(std::nullopt)) {
      INFO(runner << " HEAD_DIM " << p.at("HEAD_DIM") << " " << p.at("DTYPE") << " Nq " << p.at("N_CTX_Q")
                  << " Nk " << p.at("N_CTX_K") << " " << c.output << " rel_l2=" << c.metrics.rel_l2
                  << " max_abs=" << c.metrics.max_abs << " non_finite=" << c.metrics.non_finite);
      CHECK(c.pass);
      checks[c.output] = std::move(c);
    }
  }
  return checks;
}

// The whole backward and the dK/dV kernel alone: both pass, and the lone kernel's dK and dV are the whole
// backward's bits (the same products; the whole one also accumulates dQ).
void run_backward(const std::string& backend_name, const Params& given) {
  auto backend = make_backend(backend_name, test::embedded_context());
  auto whole = run_wgmma(*backend, "flash_attn2_bwd_half", given);
  auto dkdv = run_wgmma(*backend, "flash_attn2_bwd_dkdv_half", given);
  REQUIRE(whole.size() == 3);
  REQUIRE(dkdv.size() == 2);
  CHECK(dkdv["dK"].out == whole["dK"].out);
  CHECK(dkdv["dV"].out == whole["dV"].out);
}

// Query counts past the Q / dO ring (2 stages; tiles of 128 queries at HEAD_DIM 64, 64 at 128) ending in a
// partial tile; key counts over two CTAs of 128 keys, the second partial.
const struct {
  const char* head_dim;
  const char* n_q;
  const char* n_k;
} kShapes[] = {{"64", "300", "150"}, {"128", "150", "130"}};

}  // namespace

TEST_CASE("the Hopper flash attention backward (wgmma) matches the reference on the cpu backend",
          "[attention]") {
  for (const auto& s : kShapes)
    for (const char* dtype : {"f16", "bf16"})
      run_backward(
          "cpu",
          {{"BH", "2"}, {"N_CTX_Q", s.n_q}, {"N_CTX_K", s.n_k}, {"HEAD_DIM", s.head_dim}, {"DTYPE", dtype}});
  // One key and one query: a single, almost empty tile of each.
  run_backward("cpu", {{"BH", "1"}, {"N_CTX_Q", "1"}, {"N_CTX_K", "1"}, {"HEAD_DIM", "128"}});
}

TEST_CASE("the Hopper flash attention backward (wgmma) matches the reference on the cuda backend",
          "[attention][gpu]") {
  LAB_REQUIRE_GPU_OR_SKIP();
  auto backend = make_backend("cuda", test::embedded_context());
  for (const char* d : {"64", "128"})
    for (const char* dtype : {"f16", "bf16"}) {
      // Odd counts (tail tiles of queries and keys), both runners; then the benchmark's sequence length, the
      // whole backward only (the float64 reference of each instance is the slow part).
      run_backward("cuda",
                   {{"BH", "3"}, {"N_CTX_Q", "1001"}, {"N_CTX_K", "777"}, {"HEAD_DIM", d}, {"DTYPE", dtype}});
      run_wgmma(*backend, "flash_attn2_bwd_half",
                {{"BH", "4"}, {"N_CTX_Q", "4096"}, {"N_CTX_K", "4096"}, {"HEAD_DIM", d}, {"DTYPE", dtype}});
    }
}

TEST_CASE("the wgmma backward refuses HEAD_DIM 32 and 256 with its rule", "[attention]") {
  for (const char* runner : {"flash_attn2_bwd_half", "flash_attn2_bwd_dkdv_half"})
    for (const char* d : {"32", "256"}) {
      const Runner& r = Registry::instance().get(runner);
      const Params p = resolve_params(r, {{"HEAD_DIM", d}});
      CHECK_THROWS_WITH(check_variant_runs(r.spec(), "wgmma", p), Contains("HEAD_DIM 64 or 128"));
      CHECK_NOTHROW(check_variant_runs(r.spec(), "mma", p));
    }
}

TEST_CASE(
    "the wgmma backward compiles with NVRTC for sm_90a to HGMMA, TMA loads and vector reductions, "
    "unserialised, without local memory",
    "[attention]") {
  const RuntimeContext ctx = test::embedded_context();
  for (int head_dim : {64, 128}) {
    INFO("HEAD_DIM " << head_dim);
    const CompileResult r = compile_with_nvrtc(
        *ctx.tree, *ctx.cache, fa_wgmma_bwd_compile_request(HalfType::bf16, head_dim), "sm_90");
    CHECK(r.target == "sm_90a");
    const std::string sass = disassemble_sass(r);
    CHECK_THAT(sass, Contains("HGMMA.64x"));
    CHECK_THAT(sass, Contains(".tnspB"));  // dO, Q and K read MN-major
    CHECK_THAT(sass, Contains(".tnspA"));  // dS read M-major for dQ
    CHECK_THAT(sass, Contains("UTMALDG.3D"));
    CHECK_THAT(sass, Contains("USETMAXREG"));
    CHECK_THAT(sass, Contains("REDG.E.ADD.F32x2"));
    CHECK_THAT(r.log, !Contains("serialized"));  // no wgmma where ptxas cannot prove convergence (C7520)
    CHECK_THAT(sass, !Contains("LDL") && !Contains("STL"));
  }
}
