// NHWC activation views: slices and arena allocation.
#include "pipeline/executor/nhwc_activation.hpp"

#include "nvrtc_runtime/errors.hpp"

namespace lab {

NhwcActivation NhwcActivation::slice(int first, int count) const {
  if (first < 0 || count < 0 || first + count > channels || first % 8 != 0)
    throw RuntimeError("nhwc activation slice [" + std::to_string(first) + ", " +
                       std::to_string(first + count) + ") outside " + std::to_string(channels) +
                       " channels or not at a multiple of 8");
  NhwcActivation s = *this;
  s.data = data + size_t(first) * size_t(activation_bytes(type));
  s.channels = count;
  return s;
}

NhwcActivation take_nhwc(Arena& arena, ActivationType type, int batch, int channels, int height, int width) {
  NhwcActivation a;
  a.type = type;
  a.batch = batch, a.channels = channels, a.height = height, a.width = width;
  a.pitch = nhwc_min_pitch(channels);
  const size_t bytes = size_t(a.pixels()) * size_t(a.pitch) * size_t(activation_bytes(type));
  a.data = reinterpret_cast<unsigned char*>(arena.take((bytes + sizeof(float) - 1) / sizeof(float)));
  return a;
}

}  // namespace lab
