// Activation views and the arena's bump allocation.
#include "pipeline/executor/activation.hpp"

#include "nvrtc_runtime/errors.hpp"

namespace lab {

Activation Activation::slice(int first, int count) const {
  if (first < 0 || count < 0 || first + count > channels)
    throw RuntimeError("activation slice [" + std::to_string(first) + ", " + std::to_string(first + count) +
                       ") outside " + std::to_string(channels) + " channels");
  Activation s = *this;
  s.data = data + first * channel_stride;
  s.channels = count;
  return s;
}

float* Arena::take(size_t floats) {
  constexpr size_t kAlign = 256;  // bytes: keeps every buffer aligned for vector loads
  const size_t offset = used_;
  used_ += (floats * sizeof(float) + kAlign - 1) / kAlign * kAlign;
  if (!measuring() && used_ > block_.bytes())
    throw RuntimeError(
        "activation arena overflow: the plan changed between "
        "its measuring and real pass");
  // The measuring pass hands out addresses above a fake base; they are never
  // dereferenced.
  constexpr uintptr_t kMeasuringBase = uintptr_t(1) << 20;
  if (measuring()) return reinterpret_cast<float*>(kMeasuringBase + offset);
  return reinterpret_cast<float*>(static_cast<char*>(block_.get()) + offset);
}

Activation Arena::take_activation(int batch, int channels, int height, int width) {
  Activation a;
  a.batch = batch, a.channels = channels, a.height = height, a.width = width;
  a.channel_stride = int64_t(height) * width;
  a.batch_stride = int64_t(channels) * a.channel_stride;
  a.data = take(size_t(batch) * a.batch_stride);
  return a;
}

void Arena::allocate(Backend& backend) {
  block_ = backend.alloc(used_);
  used_ = 0;
}

}  // namespace lab
