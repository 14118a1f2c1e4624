// CPU reference of the Conv2d (+ bias) (+ SiLU) backward, float64, written from the chain rule in scatter form
// (each output element pushes its gradient to the inputs and weights it read), independently of the kernels,
// which gather. Proven against conv2d_reference by finite differences (tests/test_conv2d_backward.cpp).
#pragma once
#include <vector>

#include "kernels/nn/conv2d_shape.hpp"

namespace lab {

struct Conv2dGradients {
  std::vector<double> grad_z;       // [batch, c_out, ho, wo]: d loss / d pre-activation (grad_out when !silu)
  std::vector<double> grad_in;      // [batch, c_in, h, w]
  std::vector<double> grad_weight;  // [c_out, c_in/groups, k, k]
  std::vector<double> grad_bias;    // [c_out]
};

// d/dz of SiLU(z) = z * sigmoid(z), in float64.
double silu_derivative(double z);

// The gradients of a loss whose gradient with respect to the layer's output act(conv(in) + bias) is
// `grad_out` [batch, c_out, ho, wo]; the pre-activation z is recomputed in float64 for SiLU's derivative.
Conv2dGradients conv2d_backward_reference(const Conv2dShape& s, int batch, int h, int w,
                                          const std::vector<float>& in, const std::vector<float>& weight,
                                          const std::vector<float>& bias, const std::vector<float>& grad_out);

}  // namespace lab
