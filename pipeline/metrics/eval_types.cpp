// The IoU thresholds and numpy's linspace.
#include "pipeline/metrics/eval_types.hpp"

#include <cstddef>

namespace lab::metrics {

std::vector<double> linspace(double start, double stop, int count) {
  std::vector<double> values(static_cast<size_t>(count));
  const double step = count > 1 ? (stop - start) / (count - 1) : 0;
  for (int i = 0; i < count; ++i) values[size_t(i)] = i * step + start;
  if (count > 1) values.back() = stop;
  return values;
}

const std::array<double, kIouThresholdCount>& iou_thresholds() {
  static const std::array<double, kIouThresholdCount> thresholds = [] {
    std::array<double, kIouThresholdCount> t{};
    const std::vector<double> values = linspace(0.5, 0.95, kIouThresholdCount);
    for (int i = 0; i < kIouThresholdCount; ++i) t[size_t(i)] = values[size_t(i)];
    return t;
  }();
  return thresholds;
}

}  // namespace lab::metrics
