// conv2d_random_inputs: three seeded uniform tensors.
#include "kernels/nn/conv2d_inputs.hpp"

#include <cmath>

#include "kernels/compare.hpp"

namespace lab {

Conv2dInputs conv2d_random_inputs(const Conv2dShape& s, int batch, int h, int w, uint64_t seed) {
  const int fan_in = s.c_in / s.groups * s.kernel * s.kernel;
  const float wscale = 1.0f / std::sqrt(float(fan_in));
  return {random_uniform(size_t(batch) * s.c_in * h * w, -1.0f, 1.0f, derive_seed(seed, "in")),
          random_uniform(size_t(s.weight_count()), -wscale, wscale, derive_seed(seed, "weight")),
          random_uniform(size_t(s.c_out), -0.5f, 0.5f, derive_seed(seed, "bias"))};
}

}  // namespace lab
