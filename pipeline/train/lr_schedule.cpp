// LrSchedule (lr_schedule.hpp): np.interp on two points, Python's round (half to even).
#include "pipeline/train/lr_schedule.hpp"

#include <algorithm>
#include <cmath>

namespace lab::train {
namespace {

// np.interp(x, [0, x1], [y0, y1]) for 0 <= x <= x1.
double interp(double x, double x1, double y0, double y1) {
  return x1 <= 0 ? y1 : y0 + (y1 - y0) * (x / x1);
}

}  // namespace

LrSchedule::LrSchedule(const ScheduleSettings& settings) : s_(settings) {
  if (s_.warmup_epochs > 0)
    warmup_ = std::max((long long)std::nearbyint(s_.warmup_epochs * double(s_.batches_per_epoch)), 100LL);
}

double LrSchedule::lf(int epoch) const {
  return std::max(1.0 - double(epoch) / s_.epochs, 0.0) * (1.0 - s_.lrf) + s_.lrf;
}

ScheduledStep LrSchedule::at(int epoch, long long batch_index) const {
  const long long ni = batch_index + s_.batches_per_epoch * epoch;
  const double target = s_.lr0 * lf(epoch), nominal = double(s_.nbs) / s_.batch;
  ScheduledStep step;
  if (ni > warmup_) {
    step.lr.fill(target);
    step.momentum = s_.momentum;
    step.accumulate = std::max(int(std::nearbyint(nominal)), 1);
    return step;
  }
  const double x = double(ni), x1 = double(warmup_);
  for (int g = 0; g < kParameterGroups; ++g)
    step.lr[size_t(g)] = interp(x, x1, g == kBiasGroup ? s_.warmup_bias_lr : 0.0, target);
  step.momentum = s_.warmup_momentum_applies ? interp(x, x1, s_.warmup_momentum, s_.momentum) : s_.momentum;
  step.accumulate = std::max(1, int(std::nearbyint(interp(x, x1, 1.0, nominal))));
  return step;
}

}  // namespace lab::train
