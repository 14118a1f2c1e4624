// The reference executor's tensors: [batch, channels, height, width], row-major. Activations (RefTensor) are
// float32 between ops (as the golden and the kernels store them); ops accumulate in float64. Gradients of the
// reference backward (RefGrad) are float64 throughout.
#pragma once
#include <cstddef>
#include <cstdint>
#include <vector>

namespace lab::reference {

template <class T>
struct BasicRefTensor {
  int batch = 0, channels = 0, height = 0, width = 0;
  std::vector<T> values;

  BasicRefTensor() = default;
  BasicRefTensor(int b, int c, int h, int w)
      : batch(b), channels(c), height(h), width(w), values(size_t(b) * c * h * w) {}
  size_t plane() const { return size_t(height) * width; }
  T* channel(int b, int c) { return values.data() + (size_t(b) * channels + c) * plane(); }
  const T* channel(int b, int c) const { return values.data() + (size_t(b) * channels + c) * plane(); }
  std::vector<int64_t> shape() const { return {batch, channels, height, width}; }
};

using RefTensor = BasicRefTensor<float>;
using RefGrad = BasicRefTensor<double>;

}  // namespace lab::reference
