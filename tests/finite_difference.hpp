// Central finite differences for the float64 reference backward tests: the analytic gradient of a scalar
// loss against (loss(x + h) - loss(x - h)) / 2h, one element at a time.
#pragma once
#include <algorithm>
#include <cmath>
#include <vector>

namespace lab::test {

// Largest |analytic - numeric| over every element of `x`, relative to the largest |analytic| (h = 1e-5: on
// values of O(1) truncation ~1e-10, cancellation ~1e-11). `loss` reads x, which is restored after each
// element.
template <class Loss>
double finite_difference_error(std::vector<double>& x, const std::vector<double>& analytic, Loss loss) {
  const double h = 1e-5;
  double worst = 0, scale = 1e-12;
  for (size_t i = 0; i < x.size(); ++i) {
    const double saved = x[i];
    x[i] = saved + h;
    const double up = loss();
    x[i] = saved - h;
    const double down = loss();
    x[i] = saved;
    worst = std::max(worst, std::fabs((up - down) / (2 * h) - analytic[i]));
    scale = std::max(scale, std::fabs(analytic[i]));
  }
  return worst / scale;
}

}  // namespace lab::test
