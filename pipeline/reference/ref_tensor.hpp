// The reference executor's activation: a float32 [batch, channels, height, width] tensor, row-major.
// Activations are stored in float32 between ops (as the golden and the kernels do); ops accumulate in
// float64.
#pragma once
#include <cstddef>
#include <cstdint>
#include <vector>

namespace lab::reference {

struct RefTensor {
  int batch = 0, channels = 0, height = 0, width = 0;
  std::vector<float> values;

  RefTensor() = default;
  RefTensor(int b, int c, int h, int w)
      : batch(b), channels(c), height(h), width(w), values(size_t(b) * c * h * w) {}
  size_t plane() const { return size_t(height) * width; }
  float* channel(int b, int c) { return values.data() + (size_t(b) * channels + c) * plane(); }
  const float* channel(int b, int c) const { return values.data() + (size_t(b) * channels + c) * plane(); }
  std::vector<int64_t> shape() const { return {batch, channels, height, width}; }
};

}  // namespace lab::reference
