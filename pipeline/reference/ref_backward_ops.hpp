// The reference backward's elementary ops, float64: the convolution's backward (SiLU, input, folded weight
// and bias gradients), max pool, nearest upsample. Each takes what its forward kept (ref_traces.hpp) and the
// gradient of its output, and returns the gradient of its input; parameter gradients accumulate by conv name.
// Concat/slice/add of gradients are ref_ops.hpp's channel ops on RefGrad.
#pragma once
#include <map>
#include <string>
#include <vector>

#include "kernels/train/batchnorm_batch_reference.hpp"
#include "pipeline/model/yolo26_model.hpp"
#include "pipeline/reference/ref_tensor.hpp"

namespace lab::reference {

// The per-channel statistics a batch-statistics BatchNorm normalised with, over `count` values a channel.
struct ConvBatchStatistics {
  BatchStatistics stats;
  double count = 0;
};

// d loss / d a convolution's folded weight [c_out, c_in/groups, k, k] and bias [c_out]. With batch-statistics
// BatchNorm (ConvSpec::batch_statistics): d conv.weight, the unused bias of the unnormalised conv (its sum
// of du, zero up to rounding), and d bn.weight / d bn.bias in gamma / beta (empty otherwise).
struct ConvGradient {
  std::vector<double> weight, bias;
  std::vector<double> gamma, beta;
  ConvBatchStatistics batch;  // batch-statistics BatchNorm: what the forward normalised with (else empty)
};
// Keyed by ConvSpec::name.
using ConvGradients = std::map<std::string, ConvGradient>;

// A zero gradient of x's shape.
RefGrad zero_grad_like(const RefTensor& x);

// The backward of y = act(conv(x) + b) with pre-activation z: dz = dy * silu'(z) (dy when !spec.silu),
// adds dW' and db' to grads[spec.name], returns dx (or an empty RefGrad when !input_grad).
RefGrad conv2d_backward(const ConvSpec& spec, const RefTensor& x, const RefTensor& z, const RefGrad& dy,
                        ConvGradients& grads, bool input_grad = true);
// maxpool_same's backward: each output's gradient goes to the first maximum of its window in row-major scan
// order (PyTorch's max_pool2d_with_indices keeps the first index on ties: it replaces only on val > max).
RefGrad maxpool_same_backward(const RefTensor& x, int kernel, const RefGrad& dy);
// upsample2x's backward: each input cell gets the sum of its 2x2 copies.
RefGrad upsample2x_backward(const RefGrad& dy);

}  // namespace lab::reference
