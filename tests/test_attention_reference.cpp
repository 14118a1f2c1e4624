// The float64 attention and PSA references: analytic gradients against central finite differences, the
// forward against a direct formula, and the PSA composition against plain attention on the packed tensors.
#include <catch2/catch.hpp>

#include <cmath>

#include "kernels/attention/attention_reference.hpp"
#include "kernels/attention/psa_reference.hpp"
#include "kernels/compare.hpp"
#include "tests/finite_difference.hpp"

using namespace lab;

namespace {

std::vector<double> random_doubles(size_t n, double lo, double hi, uint64_t seed) {
  return to_double(random_uniform(n, float(lo), float(hi), seed));
}

double weighted_sum(const std::vector<double>& a, const std::vector<double>& w) {
  double s = 0;
  for (size_t i = 0; i < a.size(); ++i) s += a[i] * w[i];
  return s;
}

}  // namespace

TEST_CASE("attention reference gradients match central finite differences", "[attention][reference]") {
  for (auto [n_q, n_k, d] : {std::tuple{3, 5, 4}, std::tuple{6, 2, 8}}) {
    AttentionShape s{2, n_q, n_k, d, 0.7};
    auto q = random_doubles(size_t(2) * n_q * d, -2, 2, 1);
    auto k = random_doubles(size_t(2) * n_k * d, -2, 2, 2);
    auto v = random_doubles(size_t(2) * n_k * d, -1, 1, 3);
    auto d_o = random_doubles(size_t(2) * n_q * d, -1, 1, 4);
    const auto g = attention_backward_reference(q, k, v, d_o, s);
    auto loss = [&] { return weighted_sum(attention_forward_reference(q, k, v, s).o, d_o); };
    INFO("Nq=" << n_q << " Nk=" << n_k << " D=" << d);
    CHECK(test::finite_difference_error(q, g.dq, loss) < 1e-7);
    CHECK(test::finite_difference_error(k, g.dk, loss) < 1e-7);
    CHECK(test::finite_difference_error(v, g.dv, loss) < 1e-7);
  }
}

TEST_CASE("attention reference forward: single key, uniform keys, logsumexp", "[attention][reference]") {
  AttentionShape s{1, 2, 1, 4, 0.5};
  std::vector<double> q{1, 2, 3, 4, -1, 0, 1, 0}, k{0.5, 0.5, 0.5, 0.5}, v{1, -2, 3, -4};
  auto r = attention_forward_reference(q, k, v, s);
  for (int d = 0; d < 4; ++d) CHECK(r.o[d] == Approx(v[d]));  // one key: O = v, softmax weight 1
  CHECK(r.lse[0] == Approx(0.5 * 5.0));                       // L = the only scaled score
  // Two identical keys: each weight 1/2, L = score + ln 2.
  AttentionShape s2{1, 1, 2, 4, 1.0};
  std::vector<double> k2{1, 0, 0, 0, 1, 0, 0, 0}, v2{1, 1, 1, 1, 3, 3, 3, 3};
  auto r2 = attention_forward_reference({2, 0, 0, 0}, k2, v2, s2);
  CHECK(r2.o[0] == Approx(2.0));
  CHECK(r2.lse[0] == Approx(2.0 + std::log(2.0)));
  auto p = attention_probs_reference({2, 0, 0, 0}, k2, s2, 0, {0});
  CHECK(p[0] == Approx(0.5));
  CHECK(p[1] == Approx(0.5));
}

TEST_CASE("PSA reference equals plain attention on the packed tensors", "[attention][reference]") {
  PsaShape s;
  s.batch = 2, s.num_heads = 2, s.key_dim = 4, s.height = 3, s.width = 5;
  auto qkv = random_doubles(size_t(s.batch) * s.qkv_channels() * s.n(), -2, 2, 5);
  const auto packed = psa_pack_reference(qkv, s);
  const size_t head = size_t(s.batch_heads()) * s.n() * s.key_dim;
  auto section = [&](int i) {
    return std::vector<double>(packed.begin() + i * head, packed.begin() + (i + 1) * head);
  };
  AttentionShape a{s.batch_heads(), s.n(), s.n(), s.key_dim, s.softmax_scale()};
  const auto lo = attention_forward_reference(section(0), section(1), section(2), a);
  const auto hi = attention_forward_reference(section(0), section(1), section(3), a);
  const auto merged = psa_merge_reference(lo.o, hi.o, s);
  const auto direct = psa_attention_reference(qkv, s);
  REQUIRE(merged.size() == direct.x.size());
  for (size_t i = 0; i < merged.size(); ++i) REQUIRE(merged[i] == Approx(direct.x[i]).margin(1e-12));
  for (size_t i = 0; i < lo.lse.size(); ++i) REQUIRE(lo.lse[i] == Approx(direct.lse[i]).margin(1e-12));
  // extract-V: channel c of head h is qkv channel h*4*KD + 2*KD + c.
  CHECK(direct.v[size_t(s.out_channels() + 2 * s.key_dim + 1) * s.n() + 4] ==
        qkv[size_t(s.qkv_channels() + 4 * s.key_dim + 2 * s.key_dim + 1) * s.n() + 4]);
}

TEST_CASE("PSA reference gradient matches central finite differences", "[attention][reference]") {
  PsaShape s;
  s.batch = 1, s.num_heads = 2, s.key_dim = 2, s.height = 2, s.width = 3;
  auto qkv = random_doubles(size_t(s.batch) * s.qkv_channels() * s.n(), -2, 2, 6);
  const size_t out = size_t(s.batch) * s.out_channels() * s.n();
  const auto g_x = random_doubles(out, -1, 1, 7), g_v = random_doubles(out, -1, 1, 8);
  const auto grad = psa_attention_backward_reference(qkv, g_x, g_v, s);
  auto loss = [&] {
    const auto r = psa_attention_reference(qkv, s);
    return weighted_sum(r.x, g_x) + weighted_sum(r.v, g_v);
  };
  CHECK(test::finite_difference_error(qkv, grad, loss) < 1e-7);
}
