// NHWC activation views: slices and arena allocation.
#include "pipeline/executor/nhwc_activation.hpp"

#include "nvrtc_runtime/errors.hpp"

namespace lab {

NhwcActivation NhwcActivation::slice(int first, int count) const {
  if (first < 0 || count < 0 || first + count > channels || first % 8 != 0)
    throw RuntimeError("nhwc activation slice [" + std::to_string(first) + ", " + std::to_string(first + count) +
                       ") outside " + std::to_string(channels) + " channels or not at a multiple of 8");
  NhwcActivation s = *this;
  s.data = data + first;
  s.channels = count;
  return s;
}

NhwcActivation take_nhwc(Arena& arena, int batch, int channels, int height, int width) {
  NhwcActivation a;
  a.batch = batch, a.channels = channels, a.height = height, a.width = width;
  a.pitch = nhwc_min_pitch(channels);
  const size_t elements = size_t(a.pixels()) * size_t(a.pitch);
  a.data = reinterpret_cast<uint16_t*>(arena.take((elements + 1) / 2));
  return a;
}

}  // namespace lab
