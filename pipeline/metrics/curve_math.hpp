// The two numpy routines the AP definitions are written with: numpy.interp (piecewise-linear, `left` below
// the first point, the last value from the last point on) and numpy.trapezoid.
#pragma once
#include <vector>

namespace lab::metrics {

// xp non-decreasing (ties allowed), fp the same length, not empty.
double interp(double x, const std::vector<double>& xp, const std::vector<double>& fp, double left);

double trapezoid(const std::vector<double>& y, const std::vector<double>& x);

}  // namespace lab::metrics
