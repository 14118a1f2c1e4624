// numpy.interp and numpy.trapezoid for one point / one curve.
#include "pipeline/metrics/curve_math.hpp"

#include <algorithm>

namespace lab::metrics {

double interp(double x, const std::vector<double>& xp, const std::vector<double>& fp, double left) {
  if (x < xp.front()) return left;
  if (x >= xp.back()) return fp.back();
  // The last j with xp[j] <= x; then xp[j + 1] > x, so the segment has a positive width.
  const size_t j = size_t(std::upper_bound(xp.begin(), xp.end(), x) - xp.begin()) - 1;
  if (x == xp[j]) return fp[j];
  const double slope = (fp[j + 1] - fp[j]) / (xp[j + 1] - xp[j]);
  return slope * (x - xp[j]) + fp[j];
}

double trapezoid(const std::vector<double>& y, const std::vector<double>& x) {
  double area = 0;
  for (size_t i = 1; i < x.size(); ++i) area += (x[i] - x[i - 1]) * (y[i] + y[i - 1]) / 2;
  return area;
}

}  // namespace lab::metrics
