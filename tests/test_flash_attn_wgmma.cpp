// The Hopper Flash Attention forward (variants `wgmma` and `wgmma_pipelined` of flash_attn2_fwd_half,
// flash_attn_wgmma.cu and flash_attn_wgmma_pipelined.cu): against the float64 reference on the cpu emulator
// (its wgmma, TMA and mbarrier models) and on the H200, every output element written again after poisoning;
// and their NVRTC builds for sm_90a really are HGMMA with TMA, unserialised, and no local memory (no GPU
// needed).
#include <algorithm>

#include <catch2/catch.hpp>

#include "kernels/attention/flash_attn_wgmma_op.hpp"
#include "kernels/runner.hpp"
#include "nvrtc_runtime/cuda_compiler.hpp"
#include "tests/scoped_env.hpp"
#include "tests/test_helpers.hpp"

using namespace lab;
using Catch::Matchers::Contains;

namespace {

// The Hopper variants, each with its kernel.
const struct {
  const char* variant;
  CompileRequest (*request)(HalfType, int);
} kVariants[] = {{"wgmma", fa_wgmma_compile_request},
                 {"wgmma_pipelined", fa_wgmma_pipelined_compile_request}};

// Runs a Hopper variant twice (the second time after poisoning its outputs) and requires every check to pass.
void run_wgmma(const std::string& backend_name, const char* variant, const Params& given) {
  auto backend = make_backend(backend_name, test::embedded_context());
  const Runner& r = Registry::instance().get("flash_attn2_fwd_half");
  const Params p = resolve_params(r, given);
  auto inst = r.instantiate(*backend, variant, p, 7);
  for (int round = 0; round < 2; ++round) {
    if (round) inst->poison();
    inst->launch();
    for (auto& c : inst->check(std::nullopt)) {
      INFO(backend_name << " " << variant << " HEAD_DIM " << p.at("HEAD_DIM") << " " << p.at("DTYPE")
                        << " Nq " << p.at("N_CTX_Q") << " Nk " << p.at("N_CTX_K") << " " << c.output
                        << " rel_l2=" << c.metrics.rel_l2 << " max_abs=" << c.metrics.max_abs
                        << " non_finite=" << c.metrics.non_finite);
      CHECK(c.pass);
    }
  }
}

// Key counts that wrap the K/V ring (more tiles than stages: 3 at HEAD_DIM 64, 2 above) and end in a partial
// tile (the pipelined schedule's loop, its peeled first tile and its last P V); query counts that end in a
// partial block of 128.
const struct {
  const char* head_dim;
  const char* n_q;
  const char* n_k;
} kShapes[] = {{"64", "130", "400"}, {"128", "70", "300"}, {"256", "20", "150"}};

// The pipelined forward at SCALE 4, where many rows move their maximum by more than 2^8 after their first
// tile, and at SCALE 0.01, where none does; fp16 and bf16.
void run_lazy_maxima(const std::string& backend_name, const char* head_dim, const char* n_q, const char* n_k) {
  for (const char* scale : {"4", "0.01"})
    for (const char* dtype : {"f16", "bf16"})
      run_wgmma(backend_name, "wgmma_pipelined",
                {{"BH", "1"}, {"N_CTX_Q", n_q}, {"N_CTX_K", n_k}, {"HEAD_DIM", head_dim}, {"SCALE", scale},
                 {"DTYPE", dtype}});
}

}  // namespace

TEST_CASE(
    "the Hopper flash attention forwards (wgmma and wgmma_pipelined) match the reference on the cpu backend",
    "[attention]") {
  for (const auto& v : kVariants) {
    for (const auto& s : kShapes)
      for (const char* dtype : {"f16", "bf16"})
        run_wgmma("cpu", v.variant,
                  {{"BH", "2"},
                   {"N_CTX_Q", s.n_q},
                   {"N_CTX_K", s.n_k},
                   {"HEAD_DIM", s.head_dim},
                   {"DTYPE", dtype}});
    // One key and one query: a single, almost empty tile (the pipelined loop runs no iteration).
    run_wgmma("cpu", v.variant, {{"BH", "1"}, {"N_CTX_Q", "1"}, {"N_CTX_K", "1"}, {"HEAD_DIM", "64"}});
  }
}

TEST_CASE("the pipelined wgmma forward's lazy row maxima hold when the maxima keep moving", "[attention]") {
  // A row keeps its maximum until a tile's exceeds it by more than 2^8 (online_softmax's STALE_LOG2), and O's
  // rescale is skipped while no row of the warp moved. At SCALE 4 the scores' spread (about 15 in the log2
  // domain at HEAD_DIM 64) makes many rows move by more than that after their first tile, so both the moved
  // and the skipped rescale run; at SCALE 0.01 no row moves after its first tile. (A rescale skipped every
  // time fails the first: O rel_l2 about 30.)
  run_lazy_maxima("cpu", "64", "70", "900");
}

TEST_CASE("the pipelined wgmma forward's lazy row maxima hold when the maxima keep moving, on the cuda backend",
          "[attention][gpu]") {
  // The cpu case's two scales at every HEAD_DIM and more keys, on the GPU: rows that move their maximum by
  // more than 2^8 after the first tile (SCALE 4) and rows that never do (SCALE 0.01).
  LAB_REQUIRE_GPU_OR_SKIP();
  for (const char* d : {"64", "128", "256"}) run_lazy_maxima("cuda", d, "300", "2777");
}

TEST_CASE(
    "the Hopper flash attention forwards (wgmma and wgmma_pipelined) match the reference on the cuda backend",
    "[attention][gpu]") {
  LAB_REQUIRE_GPU_OR_SKIP();
  for (const auto& v : kVariants) {
    for (const char* d : {"64", "128", "256"})
      for (const char* dtype : {"f16", "bf16"})
        run_wgmma("cuda", v.variant,
                  {{"BH", "3"}, {"N_CTX_Q", "1000"}, {"N_CTX_K", "777"}, {"HEAD_DIM", d}, {"DTYPE", dtype}});
    run_wgmma("cuda", v.variant, {{"BH", "2"}, {"N_CTX_Q", "400"}, {"N_CTX_K", "400"}, {"HEAD_DIM", "64"}});
  }
}

TEST_CASE(
    "the Hopper flash attention forwards match the reference with other WGMMA_TILE tiles on the cpu backend",
    "[attention]") {
  // The N 176 and 192 products, more stages than the defaults, and key counts that end in a partial tile
  // after wrapping the ring.
  const struct {
    const char *head_dim, *tile, *n_k;
  } cases[] = {
      {"64", "192x3", "700"},  {"64", "64x4", "300"},  {"64", "256x3", "1000"},
      {"128", "176x2", "400"}, {"128", "192x2", "500"}};
  const Runner& r = Registry::instance().get("flash_attn2_fwd_half");
  for (const auto& v : kVariants)
    for (const auto& c : cases) {
      // 256 x 3 (wgmma's default at HEAD_DIM 64) is over the pipelined schedule's registers.
      if (!variant_refusal(r.spec(), v.variant,
                           resolve_params(r, {{"HEAD_DIM", c.head_dim}, {"WGMMA_TILE", c.tile}}))
               .empty())
        continue;
      run_wgmma("cpu", v.variant,
                {{"BH", "1"},
                 {"N_CTX_Q", "130"},
                 {"N_CTX_K", c.n_k},
                 {"HEAD_DIM", c.head_dim},
                 {"DTYPE", "bf16"},
                 {"WGMMA_TILE", c.tile}});
    }
}

TEST_CASE(
    "the Hopper flash attention forwards match the reference with other WGMMA_TILE tiles and EXP2_FMA on the "
    "cuda "
    "backend",
    "[attention][gpu]") {
  LAB_REQUIRE_GPU_OR_SKIP();
  const struct {
    const char *head_dim, *tile;
  } cases[] = {{"64", "192x3"}, {"64", "128x4"}, {"128", "176x2"}, {"128", "192x2"}, {"128", "128x3"}};
  for (const auto& v : kVariants)
    for (const auto& c : cases)
      for (const char* dtype : {"f16", "bf16"})
        run_wgmma("cuda", v.variant,
                  {{"BH", "3"},
                   {"N_CTX_Q", "1000"},
                   {"N_CTX_K", "777"},
                   {"HEAD_DIM", c.head_dim},
                   {"DTYPE", dtype},
                   {"WGMMA_TILE", c.tile}});
  for (const auto& v : kVariants)
    for (const char* exp2_fma : {"1", "2", "4", "8"})
      for (const char* d : {"64", "128", "256"})
        for (const char* dtype : {"f16", "bf16"})
          run_wgmma("cuda", v.variant,
                    {{"BH", "3"},
                     {"N_CTX_Q", "1000"},
                     {"N_CTX_K", "777"},
                     {"HEAD_DIM", d},
                     {"DTYPE", dtype},
                     {"EXP2_FMA", exp2_fma}});
}

TEST_CASE(
    "the persistent pipelined wgmma forward (PERSISTENT, the default) walks several query blocks a CTA and "
    "matches the reference on the cpu backend, as does its one-block-a-CTA grid",
    "[attention]") {
  // One and two emulated SMs: each CTA walks 6 or 3 query blocks of 2 heads, its K/V ring slots running on
  // from block to block (3 or 4 key tiles against 2 or 3 stages, so a block starts mid-ring), and one key
  // tile (Q released right after the first scores).
  const struct {
    const char *threads, *head_dim, *n_k, *tile;
  } cases[] = {{"1", "64", "400", "auto"},   {"2", "64", "100", "auto"},  {"1", "128", "333", "auto"},
               {"2", "128", "500", "192x2"}, {"1", "256", "150", "auto"}};
  for (const auto& c : cases) {
    const test::ScopedEnv threads("LAB_CPU_THREADS", c.threads);
    for (const char* dtype : {"f16", "bf16"})
      for (const char* persistent : {"true", "false"})
        run_wgmma("cpu", "wgmma_pipelined",
                  {{"BH", "2"},
                   {"N_CTX_Q", "300"},
                   {"N_CTX_K", c.n_k},
                   {"HEAD_DIM", c.head_dim},
                   {"DTYPE", dtype},
                   {"WGMMA_TILE", c.tile},
                   {"PERSISTENT", persistent}});
  }
}

TEST_CASE("the persistent pipelined wgmma forward matches the reference on the cuda backend",
          "[attention][gpu]") {
  LAB_REQUIRE_GPU_OR_SKIP();
  for (const char* d : {"64", "128", "256"})
    for (const char* dtype : {"f16", "bf16"})
      run_wgmma("cuda", "wgmma_pipelined",
                {{"BH", "7"},
                 {"N_CTX_Q", "4000"},
                 {"N_CTX_K", "777"},
                 {"HEAD_DIM", d},
                 {"DTYPE", dtype},
                 {"PERSISTENT", "true"}});
}

TEST_CASE("the wgmma variants refuse WGMMA_TILE tiles over shared memory or the consumers' registers",
          "[attention]") {
  const Runner& r = Registry::instance().get("flash_attn2_fwd_half");
  for (const auto& v : kVariants) {
    const Params over_shared = resolve_params(r, {{"HEAD_DIM", "128"}, {"WGMMA_TILE", "128x4"}});
    CHECK_THROWS_WITH(
        check_variant_runs(r.spec(), v.variant, over_shared),
        Contains("WGMMA_TILE 128x4 needs") && Contains("bytes of shared memory at HEAD_DIM 128"));
    CHECK_NOTHROW(check_variant_runs(r.spec(), v.variant,
                                     resolve_params(r, {{"HEAD_DIM", "128"}, {"WGMMA_TILE", "192x2"}})));
  }
  // 128 scores + 32 output + 64 of the previous P: pipelined only.
  const Params wide = resolve_params(r, {{"HEAD_DIM", "64"}, {"WGMMA_TILE", "256x2"}});
  CHECK_THROWS_WITH(check_variant_runs(r.spec(), "wgmma_pipelined", wide),
                    Contains("holds 224 accumulator registers a thread"));
  CHECK_NOTHROW(check_variant_runs(r.spec(), "wgmma", wide));
}

TEST_CASE("every WGMMA_TILE the wgmma variants accept compiles without local memory", "[attention]") {
  const RuntimeContext ctx = test::embedded_context();
  const Runner& r = Registry::instance().get("flash_attn2_fwd_half");
  const auto tile = std::find_if(r.spec().params.begin(), r.spec().params.end(),
                                 [](const ParamSpec& s) { return s.name == "WGMMA_TILE"; });
  REQUIRE(tile != r.spec().params.end());
  const std::vector<std::string> choices = tile->choices;
  int compiled = 0;
  for (const auto& v : kVariants)
    for (const char* head_dim : {"64", "128", "256"})
      for (const std::string& tile : choices) {
        const Params p = resolve_params(r, {{"HEAD_DIM", head_dim}, {"WGMMA_TILE", tile}});
        if (!variant_refusal(r.spec(), v.variant, p).empty()) continue;
        INFO(v.variant << " HEAD_DIM " << head_dim << " WGMMA_TILE " << tile);
        const CompileResult c =
            compile_with_nvrtc(*ctx.tree, *ctx.cache, r.spec().compile(v.variant, p), "sm_90");
        REQUIRE(c.resources.size() == 1);
        CHECK(c.resources[0].spill_stores == 0);
        CHECK(c.resources[0].local_bytes == 0);
        ++compiled;
      }
  CHECK(compiled >= 30);
}

TEST_CASE(
    "the wgmma forwards with exponentials on the FMA pipe (EXP2_FMA) match the reference on the cpu backend",
    "[attention]") {
  // 4 of 8 (both kinds of exponential in a row) and 8 of 8 (none on the MUFU unit but alpha's): L within
  // the 16-bit kernels' 1e-5 relative only if exp2_fma's error is (attention/exp2_fma.cuh).
  for (const auto& v : kVariants)
    for (const char* exp2_fma : {"4", "8"}) {
      const char* dtype = (v.variant == std::string("wgmma")) == (exp2_fma == std::string("4")) ? "f16" : "bf16";
      run_wgmma("cpu", v.variant,
                {{"BH", "2"},
                 {"N_CTX_Q", "130"},
                 {"N_CTX_K", "400"},
                 {"HEAD_DIM", "64"},
                 {"DTYPE", dtype},
                 {"EXP2_FMA", exp2_fma}});
      run_wgmma("cpu", v.variant,
                {{"BH", "1"},
                 {"N_CTX_Q", "70"},
                 {"N_CTX_K", "300"},
                 {"HEAD_DIM", "128"},
                 {"DTYPE", dtype},
                 {"EXP2_FMA", exp2_fma}});
    }
}

TEST_CASE("EXP2_FMA moves exponentials off the MUFU unit in both wgmma variants, 0 to 8 of every 8",
          "[attention]") {
  const Runner& r = Registry::instance().get("flash_attn2_fwd_half");
  for (const auto& v : kVariants)
    CHECK_THROWS_WITH(check_variant_runs(r.spec(), v.variant, resolve_params(r, {{"EXP2_FMA", "9"}})),
                      Contains("EXP2_FMA") && Contains("9"));
  CHECK_THROWS_WITH(fa_wgmma_compile_request(HalfType::f16, 64, WgmmaSchedule::serial, {}, 9),
                    Contains("EXP2_FMA (exponentials of every 8 on the FMA pipe) 0 to 8, not 9"));
  const RuntimeContext ctx = test::embedded_context();
  const auto sass_of = [&](const char* variant, const char* exp2_fma) {
    const Params p = resolve_params(r, {{"HEAD_DIM", "64"}, {"EXP2_FMA", exp2_fma}});
    return disassemble_sass(compile_with_nvrtc(*ctx.tree, *ctx.cache, r.spec().compile(variant, p), "sm_90"));
  };
  const auto count = [](const std::string& sass, const std::string& what, size_t from, size_t to) {
    int n = 0;
    for (size_t at = sass.find(what, from); at < to; at = sass.find(what, at + 1)) ++n;
    return n;
  };
  // The pipelined loop, per tile and thread: BN / 2 = 64 exponentials, 4 of each 8 on the polynomial, + the
  // two of alpha.
  const std::string pipelined = sass_of("wgmma_pipelined", "4");
  const size_t wait1 = pipelined.find("WARPGROUP.DEPBAR.LE gsb0, 0x1");
  const size_t wait0 = pipelined.find("WARPGROUP.DEPBAR.LE gsb0, 0x0", wait1);
  REQUIRE(wait0 != std::string::npos);
  CHECK(count(pipelined, "MUFU.EX2", wait1, wait0) == 64 / 2 + 2);
  CHECK_THAT(pipelined, !Contains("LDL") && !Contains("STL"));
  // The serial kernel (one copy of its loop, BN 256 at HEAD_DIM 64): 128 exponentials a tile and alpha's 2,
  // all but alpha's on the polynomial at 8.
  const std::string serial_all = sass_of("wgmma", "0"), serial_none = sass_of("wgmma", "8");
  CHECK(count(serial_all, "MUFU.EX2", 0, std::string::npos) == 256 / 2 + 2);
  CHECK(count(serial_none, "MUFU.EX2", 0, std::string::npos) == 2);
  CHECK_THAT(serial_none, !Contains("LDL") && !Contains("STL"));
}

TEST_CASE("the wgmma variants refuse HEAD_DIM 32 with their rule", "[attention]") {
  const Runner& r = Registry::instance().get("flash_attn2_fwd_half");
  const Params p = resolve_params(r, {{"HEAD_DIM", "32"}});
  for (const auto& v : kVariants)
    CHECK_THROWS_WITH(check_variant_runs(r.spec(), v.variant, p), Contains("HEAD_DIM 64, 128 or 256"));
  CHECK_NOTHROW(check_variant_runs(r.spec(), "mma", p));
}

TEST_CASE(
    "the wgmma forwards compile with NVRTC for sm_90a to HGMMA and TMA loads, unserialised, without local "
    "memory",
    "[attention]") {
  const RuntimeContext ctx = test::embedded_context();
  for (const auto& v : kVariants)
    for (int head_dim : {64, 128, 256}) {
      INFO(v.variant << " HEAD_DIM " << head_dim);
      const CompileResult r =
          compile_with_nvrtc(*ctx.tree, *ctx.cache, v.request(HalfType::f16, head_dim), "sm_90");
      CHECK(r.target == "sm_90a");
      const std::string sass = disassemble_sass(r);
      CHECK_THAT(sass, Contains("HGMMA.64x"));
      CHECK_THAT(sass, Contains(".tnspB"));  // V read MN-major
      CHECK_THAT(sass, Contains("UTMALDG.3D"));
      CHECK_THAT(sass, Contains("USETMAXREG"));
      CHECK_THAT(sass, !Contains("LDL") && !Contains("STL"));
      // ptxas serialises every wgmma when one sits where it cannot prove warpgroup convergence (C7520).
      CHECK_THAT(r.log, !Contains("serialized"));
    }
}

TEST_CASE("the pipelined wgmma forward's SASS runs the softmax between wait_group 1 and wait_group 0",
          "[attention]") {
  // ptxas hoists the wait for P V above the exponentials unless a block boundary stops it (the kernel's
  // block_boundary); then the softmax no longer overlaps P V. Every exponential of a tile (BN / 2 a thread,
  // plus the two of alpha) must lie between the loop's DEPBAR.LE 1 and the DEPBAR.LE 0 that follows it.
  const RuntimeContext ctx = test::embedded_context();
  const struct { int head_dim, bn; } tiles[] = {{64, 128}, {128, 128}, {256, 64}};
  for (const auto& t : tiles) {
    INFO("HEAD_DIM " << t.head_dim);
    const CompileResult r = compile_with_nvrtc(
        *ctx.tree, *ctx.cache, fa_wgmma_pipelined_compile_request(HalfType::bf16, t.head_dim), "sm_90");
    const std::string sass = disassemble_sass(r);
    const size_t wait1 = sass.find("WARPGROUP.DEPBAR.LE gsb0, 0x1");
    REQUIRE(wait1 != std::string::npos);
    const size_t wait0 = sass.find("WARPGROUP.DEPBAR.LE gsb0, 0x0", wait1);
    REQUIRE(wait0 != std::string::npos);
    int exponentials = 0;
    for (size_t at = sass.find("MUFU.EX2", wait1); at < wait0; at = sass.find("MUFU.EX2", at + 1))
      ++exponentials;
    CHECK(exponentials >= t.bn / 2 + 2);
  }
}
