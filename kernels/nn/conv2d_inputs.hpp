// The seeded inputs the conv2d runners share (conv2d, conv2d_dgrad, conv2d_wgrad): x uniform in [-1, 1),
// weights in +-1/sqrt(fan-in) so outputs stay O(1), bias in [-0.5, 0.5); each from its own derived seed.
#pragma once
#include <cstdint>
#include <vector>

#include "kernels/nn/conv2d_shape.hpp"

namespace lab {

struct Conv2dInputs {
  std::vector<float> in;      // [batch, c_in, h, w]
  std::vector<float> weight;  // [c_out, c_in/groups, k, k]
  std::vector<float> bias;    // [c_out]
};

Conv2dInputs conv2d_random_inputs(const Conv2dShape& s, int batch, int h, int w, uint64_t seed);

}  // namespace lab
