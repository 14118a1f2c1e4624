// CPU reference of Conv2d (+ bias) (+ SiLU) (+ residual), float64 accumulation, written from PyTorch's
// definition (zero padding kernel/2, grouped channels), independently of the kernels.
#pragma once
#include <vector>

#include "kernels/nn/conv2d_shape.hpp"

namespace lab {

// in [batch, c_in, h, w] dense; weight [c_out, c_in/groups, k, k]; bias [c_out]; residual empty or
// [batch, c_out, ho, wo]. Returns [batch, c_out, ho, wo].
std::vector<double> conv2d_reference(const Conv2dShape& s, int batch, int h, int w,
                                     const std::vector<float>& in, const std::vector<float>& weight,
                                     const std::vector<float>& bias, const std::vector<float>& residual);

}  // namespace lab
