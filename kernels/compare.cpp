// Output-vs-reference metrics and verdicts; seeded random inputs.
#include "kernels/compare.hpp"

#include <algorithm>
#include <cmath>
#include <random>

namespace lab {

Metrics compare_arrays(const float* out, const double* ref, size_t n) {
  Metrics m;
  m.count = n;
  double err2 = 0, ref2 = 0;
  for (size_t i = 0; i < n; ++i) {
    double o = out[i], r = ref[i];
    if (!std::isfinite(o) && std::isfinite(r)) {
      if (m.non_finite++ == 0) m.max_abs = INFINITY, m.worst_index = i, m.worst_out = o, m.worst_ref = r;
      continue;
    }
    double e = std::fabs(o - r);
    if (!std::isfinite(r)) e = (o == r) ? 0 : INFINITY;  // a non-finite reference must be matched exactly
    err2 += e * e;
    ref2 += r * r;
    if (e > m.max_abs) m.max_abs = e, m.worst_index = i, m.worst_out = o, m.worst_ref = r;
    m.max_rel = std::max(m.max_rel, e / std::max(std::fabs(r), 1e-6));
  }
  m.rel_l2 = m.non_finite ? INFINITY : (ref2 > 0 ? std::sqrt(err2 / ref2) : std::sqrt(err2));
  return m;
}

OutputCheck make_check(std::string name, std::vector<size_t> shape, const std::vector<float>& out,
                       const std::vector<double>& ref, const Tolerance& tol, bool keep_arrays) {
  OutputCheck c;
  c.output = std::move(name);
  c.shape = std::move(shape);
  c.tolerance = tol;
  size_t n = std::min(out.size(), ref.size());
  c.metrics = compare_arrays(out.data(), ref.data(), n);
  if (out.size() != ref.size())
    c.metrics.non_finite += (out.size() > ref.size() ? out.size() : ref.size()) - n;
  c.pass = c.metrics.non_finite == 0 && std::isfinite(c.metrics.rel_l2) && c.metrics.rel_l2 <= tol.rel_l2 &&
           c.metrics.max_abs <= tol.max_abs;
  if (keep_arrays) {
    c.out = out;
    c.ref.assign(ref.begin(), ref.end());
  }
  return c;
}

uint64_t derive_seed(uint64_t seed, const std::string& label) {
  uint64_t h = 1469598103934665603ull ^ (seed * 0x9e3779b97f4a7c15ull);
  for (unsigned char ch : label) h = (h ^ ch) * 1099511628211ull;
  return h;
}

std::vector<float> random_uniform(size_t n, float lo, float hi, uint64_t seed) {
  std::mt19937_64 gen(seed);
  std::vector<float> v(n);
  for (auto& x : v) {
    double u = double(gen() >> 11) * 0x1.0p-53;  // portable, unlike std::uniform_real_distribution
    x = float(lo + (hi - lo) * u);
  }
  return v;
}

std::vector<unsigned char> random_bytes(size_t n, uint64_t seed) {
  std::vector<unsigned char> bytes(n);
  std::ranges::transform(random_uniform(n, 0.0f, 256.0f, seed), bytes.begin(),
                         [](float v) { return static_cast<unsigned char>(std::min(v, 255.0f)); });
  return bytes;
}

}  // namespace lab
