// The Flash Attention backward's inputs and kernels: the dQ and dK/dV runners (each kernel alone) against the
// float64 reference and bit for bit against the whole backward, and the O and L the backward runners are fed
// (OL=kernel: the forward kernel's own, proven by rebuilding the path by hand and by perturbing O;
// OL=reference: the float64 forward's).
#include <catch2/catch.hpp>

#include "kernels/attention/attention_runner_support.hpp"
#include "kernels/attention/flash_attn2_op.hpp"
#include "kernels/runner.hpp"
#include "tests/test_helpers.hpp"

using namespace lab;

namespace {

constexpr uint64_t kSeed = 11;

// Every check of one launch of `runner` (its default variant unless given), by output name.
std::map<std::string, OutputCheck> run_checks(Backend& backend, const std::string& runner,
                                              const Params& given, const std::string& variant = "") {
  const Runner& r = Registry::instance().get(runner);
  auto inst = r.instantiate(backend, resolve_variant(r, variant), resolve_params(r, given), kSeed);
  inst->launch();
  std::map<std::string, OutputCheck> checks;
  for (auto& c : inst->check(std::nullopt)) checks[c.output] = std::move(c);
  return checks;
}

// Every variant of `runner` whose rule takes the case (wgmma refuses HEAD_DIM 32), launched twice
// (re-poisoned between), every output within tolerance.
void check_all_variants(Backend& backend, const std::string& runner, const Params& given) {
  const Runner& r = Registry::instance().get(runner);
  const Params p = resolve_params(r, given);
  for (const auto& variant : r.variants()) {
    if (!variant_refusal(r.spec(), variant.name, p).empty()) continue;
    auto inst = r.instantiate(backend, variant.name, p, kSeed);
    for (int round = 0; round < 2; ++round) {
      if (round) inst->poison();
      inst->launch();
      for (auto& c : inst->check(std::nullopt)) {
        INFO(runner << " " << variant.name << " " << c.output << " rel_l2=" << c.metrics.rel_l2
                    << " max_abs=" << c.metrics.max_abs << " non_finite=" << c.metrics.non_finite);
        CHECK(c.pass);
      }
    }
  }
}

// The dQ and dK/dV runners pass their checks, and give the bits of the whole backward's dQ, dK and dV.
void check_kernels_alone(const std::string& backend_name, const std::string& suffix, const Params& p,
                         const std::vector<std::string>& variants) {
  auto backend = make_backend(backend_name, test::embedded_context());
  check_all_variants(*backend, "flash_attn2_bwd_dq" + suffix, p);
  check_all_variants(*backend, "flash_attn2_bwd_dkdv" + suffix, p);
  for (const std::string& variant : variants) {
    INFO(backend_name << " " << suffix << " " << variant);
    auto whole = run_checks(*backend, "flash_attn2_bwd" + suffix, p, variant);
    auto dq = run_checks(*backend, "flash_attn2_bwd_dq" + suffix, p, variant);
    auto dkdv = run_checks(*backend, "flash_attn2_bwd_dkdv" + suffix, p, variant);
    REQUIRE(dq.size() == 1);
    REQUIRE(dkdv.size() == 2);
    REQUIRE_FALSE(whole["dQ"].out.empty());
    CHECK(dq["dQ"].out == whole["dQ"].out);
    CHECK(dkdv["dK"].out == whole["dK"].out);
    CHECK(dkdv["dV"].out == whole["dV"].out);
  }
}

const Params kRagged{{"BH", "2"}, {"N_CTX_Q", "70"}, {"N_CTX_K", "45"}, {"HEAD_DIM", "32"}};
Params ragged_half(const char* dtype) {
  Params p = kRagged;
  p["DTYPE"] = dtype;
  return p;
}

}  // namespace

TEST_CASE("the dQ and dK/dV kernels run alone on the cpu backend", "[attention]") {
  check_kernels_alone("cpu", "", kRagged, {"tiled", "row_per_cta"});
  for (const char* dtype : {"f16", "bf16"}) check_kernels_alone("cpu", "_half", ragged_half(dtype), {"mma"});
}

TEST_CASE("the dQ and dK/dV kernels run alone on the cuda backend", "[attention][gpu]") {
  LAB_REQUIRE_GPU_OR_SKIP();
  for (const char* d : {"16", "32", "64", "128", "256"})
    check_kernels_alone("cuda", "", {{"BH", "3"}, {"N_CTX_Q", "300"}, {"N_CTX_K", "211"}, {"HEAD_DIM", d}},
                        {"tiled", "row_per_cta"});
  for (const char* d : {"32", "64", "128", "256"})
    for (const char* dtype : {"f16", "bf16"})
      check_kernels_alone(
          "cuda", "_half",
          {{"BH", "3"}, {"N_CTX_Q", "300"}, {"N_CTX_K", "211"}, {"HEAD_DIM", d}, {"DTYPE", dtype}}, {"mma"});
}

TEST_CASE("the backward runners feed the forward kernel's own O and L by default", "[attention]") {
  auto backend = make_backend("cpu", test::embedded_context());
  const Runner& bwd = Registry::instance().get("flash_attn2_bwd");
  CHECK(resolve_params(bwd, kRagged).at("OL") == "kernel");
  CHECK_THROWS_WITH(resolve_params(bwd, {{"OL", "ref"}}), Catch::Contains("one of kernel, reference"));

  // The path by hand: the tiled forward kernel's O and L, then the backward, on the runner's seeded inputs.
  const Params p = resolve_params(bwd, kRagged);
  const AttentionSize size(p);
  const AttentionInputs in = random_attention_inputs(size, kSeed, true);
  const FlashAttn2Op op(*backend, "tiled", size.shape.head_dim,
                        choose_fa2_blocks(size.shape.batch_heads, size.shape.n_q, size.shape.n_k, 32));
  auto q = backend->upload_vector(in.q), k = backend->upload_vector(in.k), v = backend->upload_vector(in.v),
       d_o = backend->upload_vector(in.d_o);
  auto o = backend->alloc_array<float>(size.q_elems()), lse = backend->alloc_array<float>(size.rows()),
       delta = backend->alloc_array<float>(size.rows()), dq = backend->alloc_array<float>(size.q_elems()),
       dk = backend->alloc_array<float>(size.k_elems()), dv = backend->alloc_array<float>(size.k_elems());
  auto backward_dq = [&] {
    op.backward(q.as<float>(), k.as<float>(), v.as<float>(), o.as<float>(), d_o.as<float>(), lse.as<float>(),
                delta.as<float>(), dq.as<float>(), dk.as<float>(), dv.as<float>(), size.problem());
    backend->synchronize();
    return backend->download_vector<float>(dq, size.q_elems());
  };
  op.forward(q.as<float>(), k.as<float>(), v.as<float>(), o.as<float>(), lse.as<float>(), size.problem());
  const std::vector<float> by_hand = backward_dq();

  auto from_kernel = run_checks(*backend, "flash_attn2_bwd", kRagged, "tiled");
  CHECK(from_kernel["dQ"].pass);
  CHECK(from_kernel["dQ"].out == by_hand);

  // O perturbed in one element by 1e-3 (far above the forward's error, ~1e-7): the same path gives another
  // dQ, so the equality above holds only for the forward kernel's own O.
  std::vector<float> o_host = backend->download_vector<float>(o, size.q_elems());
  o_host[5] += 1e-3f;
  backend->upload(o.as<float>(), o_host.data(), o_host.size() * sizeof(float));
  CHECK(backward_dq() != from_kernel["dQ"].out);

  // OL=reference feeds the float64 forward: the gradients pass too, with other bits.
  Params reference = kRagged;
  reference["OL"] = "reference";
  auto from_reference = run_checks(*backend, "flash_attn2_bwd", reference, "tiled");
  CHECK(from_reference["dQ"].pass);
  CHECK(from_reference["dQ"].out != from_kernel["dQ"].out);
}

TEST_CASE("the fp16 and bf16 backward runners feed the forward kernel's own O and L by default",
          "[attention]") {
  auto backend = make_backend("cpu", test::embedded_context());
  for (const char* dtype : {"f16", "bf16"}) {
    INFO(dtype);
    Params reference = ragged_half(dtype);
    reference["OL"] = "reference";
    auto from_kernel = run_checks(*backend, "flash_attn2_bwd_half", ragged_half(dtype));
    auto from_reference = run_checks(*backend, "flash_attn2_bwd_half", reference);
    for (const char* grad : {"dQ", "dK", "dV"}) {
      INFO(grad);
      CHECK(from_kernel[grad].pass);
      CHECK(from_reference[grad].pass);
    }
    CHECK(from_reference["dQ"].out != from_kernel["dQ"].out);
  }
}
