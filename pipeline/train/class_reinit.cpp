// adopt_classes (class_reinit.hpp): one seeded stream over the levels, one-to-many branches first.
#include "pipeline/train/class_reinit.hpp"

#include <cmath>
#include <random>

#include "nvrtc_runtime/errors.hpp"

namespace lab::train {
namespace {

// A uniform double in [-bound, bound) from 53 bits of the generator (the same on every platform).
double uniform(std::mt19937_64& rng, double bound) {
  const double unit = double(rng() >> 11) * 0x1.0p-53;
  return (2 * unit - 1) * bound;
}

void rebuild_class_conv(ConvSpec& conv, int nc, int stride, std::mt19937_64& rng) {
  if (conv.bn || conv.groups != 1 || conv.kernel != 1)
    throw RuntimeError("class re-initialisation: " + conv.name + " is not the head's 1x1 Conv2d");
  const int fan_in = conv.c_in;
  const double bound = 1.0 / std::sqrt(double(fan_in));
  conv.c_out = nc;
  conv.weight.resize(size_t(nc) * size_t(fan_in));
  for (float& w : conv.weight) w = float(uniform(rng, bound));
  const double prior = std::log(5.0 / nc / std::pow(640.0 / stride, 2));
  conv.bias.assign(size_t(nc), float(prior));
}

}  // namespace

bool needs_class_reinit(const Yolo26Model& model, const std::vector<std::string>& names) {
  return int(names.size()) != model.nc;
}

void adopt_classes(Yolo26Model& model, const std::vector<std::string>& names, uint64_t seed) {
  if (names.empty()) throw UsageError("the dataset names no class");
  if (needs_class_reinit(model, names)) {
    const int nc = int(names.size());
    std::mt19937_64 rng(seed);
    for (LayerSpec& layer : model.layers) {
      if (layer.kind != LayerSpec::Kind::Detect) continue;
      for (auto* levels : {&layer.detect.one2many, &layer.detect.levels})
        for (DetectLevelSpec& level : *levels) rebuild_class_conv(level.cls.back(), nc, level.stride, rng);
      layer.detect.nc = nc;
      layer.out_channels = 4 + nc;
    }
    model.nc = nc;
  }
  model.class_names = names;
}

}  // namespace lab::train
