// The input gradient of a stride-1 convolution as a forward convolution: dx = conv(dz, w~) with the weights
// transposed and their taps flipped, w~[ci][co][t] = w[co][ci][K*K-1-t] (depthwise: w~[c][0][t] =
// w[c][0][K*K-1-t]), zero padding K/2 on the same grid, no bias or activation. It runs on the forward's
// implicit-GEMM and depthwise kernels (conv2d_tiled, conv2d_mma, conv2d_depthwise), whose staging is
// pipelined, rather than conv2d_dgrad's per-element gathers: on the H200 at batch 32 the forward's 3x3 convs
// took 5.2 ms where the input gradients of the same layers took 16.9 ms (`lab bench train-step --kernels`).
#pragma once
#include <memory>
#include <vector>

#include "kernels/nn/conv2d_op.hpp"

namespace lab {

// Stride 1, an odd kernel, and groups 1 or depthwise: the shapes whose input gradient is a forward conv.
bool input_grad_runs_as_conv(const Conv2dShape& s);

// The forward conv computing the input gradient of a conv of shape `s` (input_grad_runs_as_conv) and
// weights [c_out, c_in/groups, k, k], at `precision` (its operands' type, as the forward conv's).
std::unique_ptr<Conv2dOp> make_input_grad_conv(NnKernels& kernels, const Conv2dShape& s,
                                               const std::vector<float>& weight, Precision precision);

// Where element (o, i, t) of the original conv's [c_out, c_in/groups, k*k] weights lives in the input-gradient
// conv's own weights (its transposed, flipped copy): for the training step's fold, which rewrites it.
ConvWeightLayout original_weight_layout(const Conv2dOp& input_grad_conv);

}  // namespace lab
