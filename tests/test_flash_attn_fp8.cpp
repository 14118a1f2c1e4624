// The fp8 Hopper Flash Attention forward (flash_attn2_fwd_fp8, kernels/attention/flash_attn_fp8.cu): the runner
// against the float64 reference of its dequantised inputs on the cpu backend (N not a multiple of the tile,
// BH > 1, one key), the V^T pre-pass against a transpose written here, the two errors at D 128, N 1024, and
// NVRTC's code for sm_90a; the [gpu] twin runs the runner's shapes on the H200.
#include <catch2/catch.hpp>

#include <cmath>

#include "kernels/attention/attention_reference.hpp"
#include "kernels/attention/flash_attn_fp8_op.hpp"
#include "kernels/attention/fp8_quantize.hpp"
#include "kernels/common/half_type.hpp"
#include "kernels/compare.hpp"
#include "kernels/runner.hpp"
#include "nvrtc_runtime/cuda_compiler.hpp"
#include "tests/test_helpers.hpp"

using namespace lab;
using Catch::Matchers::Contains;

namespace {

// Runs the runner twice (the second time after poisoning its outputs) and requires every check to pass.
void run_fp8(const std::string& backend_name, const Params& given) {
  auto backend = make_backend(backend_name, test::embedded_context());
  const Runner& r = Registry::instance().get("flash_attn2_fwd_fp8");
  const Params p = resolve_params(r, given);
  auto inst = r.instantiate(*backend, "wgmma", p, 7);
  for (int round = 0; round < 2; ++round) {
    if (round) inst->poison();
    inst->launch();
    for (auto& c : inst->check(std::nullopt)) {
      INFO(backend_name << " BH " << p.at("BH") << " Nq " << p.at("N_CTX_Q") << " Nk " << p.at("N_CTX_K")
                        << " VT_PREPASS " << p.at("VT_PREPASS") << " EXP2_FMA " << p.at("EXP2_FMA") << " " << c.output << " rel_l2="
                        << c.metrics.rel_l2 << " max_abs=" << c.metrics.max_abs);
      CHECK(c.pass);
    }
  }
}

// Key counts that wrap the ring of 3 stages of 128 keys and end in a partial tile (77: not even a multiple of
// 16, V^T's padding), query counts that end in a partial block of 128.
const struct {
  const char *bh, *n_q, *n_k;
} kShapes[] = {{"2", "200", "700"}, {"3", "130", "77"}, {"1", "1", "1"}};

// The key that position j (within 16) of a V^T row holds: the P fragment's k index j = 4 q + r stands for the
// accumulator column 2 q + r % 2 + 8 (r / 2) of its thread q (kernels/common/lab_wgmma.cuh).
constexpr int kKeyOrder[16] = {0, 1, 8, 9, 2, 3, 10, 11, 4, 5, 12, 13, 6, 7, 14, 15};

// rel_l2 of fp16 O against a float64 reference.
double rel_l2(const std::vector<float>& o, const std::vector<double>& ref) {
  double err = 0, norm = 0;
  for (size_t i = 0; i < ref.size(); ++i) {
    err += (o[i] - ref[i]) * (o[i] - ref[i]);
    norm += ref[i] * ref[i];
  }
  return std::sqrt(err / norm);
}

}  // namespace

TEST_CASE("flash_attn2_fwd_fp8 matches the float64 reference of its dequantised inputs on the cpu backend",
          "[attention][fp8]") {
  for (const auto& s : kShapes) run_fp8("cpu", {{"BH", s.bh}, {"N_CTX_Q", s.n_q}, {"N_CTX_K", s.n_k}});
  run_fp8("cpu", {{"BH", "2"}, {"N_CTX_Q", "70"}, {"N_CTX_K", "300"}, {"VT_PREPASS", "false"}});
  // Exponentials on the FMA pipe: half of them, and all but alpha's.
  run_fp8("cpu", {{"BH", "2"}, {"N_CTX_Q", "200"}, {"N_CTX_K", "700"}, {"EXP2_FMA", "4"}});
  run_fp8("cpu", {{"BH", "3"}, {"N_CTX_Q", "130"}, {"N_CTX_K", "77"}, {"EXP2_FMA", "8"}});
}

TEST_CASE("the fp8 V^T pre-pass writes V transposed, each 16 keys in the P fragment's order, padding zero",
          "[attention][fp8]") {
  const int bh = 2, n_k = 77, padded = fp8_padded_keys(n_k);
  REQUIRE(padded == 80);
  std::vector<uint8_t> v(size_t(bh) * n_k * 128);
  for (size_t i = 0; i < v.size(); ++i) v[i] = uint8_t((i * 37 + 11) % 251 + 1);  // no zero
  for (const std::string& name : available_backends()) {
    INFO("backend " << name);
    auto backend = make_backend(name, test::embedded_context());
    const FlashAttnFp8Op op(*backend);
    DeviceBuffer d_v = backend->upload_vector(v);
    DeviceBuffer d_vt = backend->upload_vector(std::vector<uint8_t>(size_t(bh) * 128 * padded, 0xee));
    op.transpose_v(d_v.as<const uint8_t>(), d_vt.as<uint8_t>(), bh, n_k);
    backend->synchronize();
    const std::vector<uint8_t> vt = backend->download_vector<uint8_t>(d_vt, size_t(bh) * 128 * padded);
    size_t wrong = 0;
    for (int h = 0; h < bh; ++h)
      for (int d = 0; d < 128; ++d)
        for (int pos = 0; pos < padded; ++pos) {
          const int key = pos / 16 * 16 + kKeyOrder[pos % 16];
          const uint8_t want = key < n_k ? v[(size_t(h) * n_k + key) * 128 + d] : 0;
          wrong += vt[(size_t(h) * 128 + d) * padded + pos] != want;
        }
    CHECK(wrong == 0);
  }
}

TEST_CASE("flash_attn2_fwd_fp8 at D 128, N 1024: its error against the dequantised and the float inputs",
          "[attention][fp8]") {
  auto backend = make_backend("cpu", test::embedded_context());
  const AttentionShape shape{1, 1024, 1024, 128, 1.0 / std::sqrt(128.0)};
  const std::vector<float> q = random_uniform(size_t(1024) * 128, -2.0f, 2.0f, 31),
                           k = random_uniform(size_t(1024) * 128, -2.0f, 2.0f, 32),
                           v = random_uniform(size_t(1024) * 128, -1.0f, 1.0f, 33);
  const E4m3Tensor eq = quantize_e4m3(q), ek = quantize_e4m3(k), ev = quantize_e4m3(v);
  const FlashAttnFp8Op op(*backend);
  DeviceBuffer d_q = backend->upload_vector(eq.codes), d_k = backend->upload_vector(ek.codes),
               d_v = backend->upload_vector(ev.codes);
  DeviceBuffer d_vt = backend->alloc_array<uint8_t>(size_t(128) * 1024);
  DeviceBuffer d_o = backend->alloc_array<uint16_t>(size_t(1024) * 128), d_l = backend->alloc_array<float>(1024);
  op.transpose_v(d_v.as<const uint8_t>(), d_vt.as<uint8_t>(), 1, 1024);
  op.forward(d_q.as<const uint8_t>(), d_k.as<const uint8_t>(), d_vt.as<const uint8_t>(), d_o.as<uint16_t>(),
             d_l.as<float>(), {1, 1024, 1024, float(shape.scale)}, {eq.scale, ek.scale, ev.scale});
  backend->synchronize();
  const std::vector<float> o =
      half_bits_to_float(backend->download_vector<uint16_t>(d_o, size_t(1024) * 128), HalfType::f16);
  const double dequantised = rel_l2(o, attention_forward_reference(eq.values, ek.values, ev.values, shape).o);
  const double unquantised = rel_l2(o, attention_forward_reference(to_double(q), to_double(k), to_double(v), shape).o);
  WARN("fp8 forward, D 128, N 1024: rel_l2 of O " << dequantised << " against the dequantised inputs' reference, "
                                                  << unquantised << " against the float inputs'");
  // The kernel's own error: P's rounding, about u / 3 (u = 2^-4); the inputs' rounding adds as much again or
  // more (scores of rounded Q and K), so the float inputs' error is the larger, and both stay under u.
  CHECK(dequantised < 0x1p-4);
  CHECK(unquantised > dequantised);
  CHECK(unquantised < 0x1p-4 * 2);
}

TEST_CASE("flash_attn2_fwd_fp8 compiles with NVRTC for sm_90a to e4m3 wgmma without local memory",
          "[attention][fp8]") {
  const RuntimeContext ctx = test::embedded_context();
  const CompileResult c = compile_with_nvrtc(*ctx.tree, *ctx.cache, fa_fp8_compile_request(), "sm_90");
  CHECK(c.target == "sm_90a");
  REQUIRE(c.resources.size() == 2);
  for (const auto& r : c.resources) {
    CHECK(r.spill_stores == 0);
    CHECK(r.local_bytes == 0);
  }
  CHECK_THAT(c.ptx, Contains("wgmma.mma_async.sync.aligned.m64n128k32.f32.e4m3.e4m3"));
  CHECK_THAT(disassemble_sass(c), Contains("QGMMA.64x128x32.F32.E4M3.E4M3"));
  // EXP2_FMA 8: of the MUFU.EX2, only alpha's two a tile (in the peeled first tile and the loop) are left.
  const CompileResult fma = compile_with_nvrtc(*ctx.tree, *ctx.cache, fa_fp8_compile_request(8), "sm_90");
  const std::string sass = disassemble_sass(fma);
  int exponentials = 0;
  for (size_t at = sass.find("MUFU.EX2"); at != std::string::npos; at = sass.find("MUFU.EX2", at + 1))
    ++exponentials;
  CHECK(exponentials == 4);
  for (const auto& r : fma.resources) CHECK(r.local_bytes == 0);
  CHECK_THROWS_WITH(fa_fp8_compile_request(9), Contains("EXP2_FMA") && Contains("not 9"));
}

TEST_CASE("flash_attn2_fwd_fp8 matches the float64 reference of its dequantised inputs on the cuda backend",
          "[attention][fp8][gpu]") {
  LAB_REQUIRE_GPU_OR_SKIP();
  for (const auto& s : kShapes) run_fp8("cuda", {{"BH", s.bh}, {"N_CTX_Q", s.n_q}, {"N_CTX_K", s.n_k}});
  run_fp8("cuda", {{"BH", "2"}, {"N_CTX_Q", "70"}, {"N_CTX_K", "300"}, {"VT_PREPASS", "false"}});
  run_fp8("cuda", {{"BH", "4"}, {"N_CTX_Q", "1024"}, {"N_CTX_K", "1024"}});
  for (const char* exp2_fma : {"1", "2", "4", "8"})
    run_fp8("cuda", {{"BH", "4"}, {"N_CTX_Q", "1000"}, {"N_CTX_K", "777"}, {"EXP2_FMA", exp2_fma}});
}
