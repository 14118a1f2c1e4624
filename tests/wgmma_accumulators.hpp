// Shared by the wgmma tests of the 8-bit and tf32 inputs: a warpgroup's accumulators laid out as its threads
// hold them (lab_wgmma.cuh), and an exact comparison of a kernel's output in that layout.
#pragma once
#include <catch2/catch.hpp>

#include <cstddef>
#include <vector>

namespace lab::test {

// element(row, column) of D [64][n] in the accumulator layout: out[t * n / 2 + i] = D[16 w + g + 8 ((i / 2) %
// 2)][8 (i / 4) + 2 q + i % 2] for thread t (w = t / 32, g = t % 32 / 4, q = t % 4).
template <typename Element>
std::vector<double> in_accumulator_layout(int n, Element element) {
  std::vector<double> out(size_t(128) * n / 2);
  for (int t = 0; t < 128; ++t)
    for (int i = 0; i < n / 2; ++i)
      out[size_t(t) * n / 2 + i] =
          element(16 * (t / 32) + t % 32 / 4 + 8 * (i / 2 % 2), 8 * (i / 4) + 2 * (t % 4) + i % 2);
  return out;
}

// How many outputs differ from `want` (NaN counts as different); the first six are reported by thread and
// register.
inline size_t accumulator_mismatches(const std::vector<float>& got, const std::vector<double>& want) {
  size_t wrong = 0;
  for (size_t i = 0; i < want.size(); ++i)
    if (!(double(got[i]) == want[i]) && wrong++ < 6)
      UNSCOPED_INFO("thread " << i / (want.size() / 128) << " d[" << i % (want.size() / 128) << "]: got "
                              << got[i] << " expected " << want[i]);
  return wrong;
}

}  // namespace lab::test
