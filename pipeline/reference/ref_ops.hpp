// The reference executor's elementary ops, written from spec/yolo26.md (plain C++, float64 accumulation,
// float32 results): convolution (+ folded BN bias, + SiLU), max pool, nearest upsample, channel concat,
// channel slice and residual add (the last three also on float64 gradients, for the reference backward).
#pragma once
#include <vector>

#include "pipeline/model/yolo26_model.hpp"
#include "pipeline/reference/ref_tensor.hpp"

namespace lab::reference {

// Conv2d with padding kernel/2, the spec's stride and groups, bias, then SiLU when spec.silu.
RefTensor conv2d(const ConvSpec& spec, const RefTensor& x);
// The same convolution with bias but without the activation: the pre-activation the backward needs.
RefTensor conv2d_linear(const ConvSpec& spec, const RefTensor& x);
// Max pool, stride 1, padding kernel/2 (padded cells never win: PyTorch pads with -inf).
RefTensor maxpool_same(const RefTensor& x, int kernel);
// Nearest-neighbour upsampling by 2 in both directions.
RefTensor upsample2x(const RefTensor& x);
// Concatenation along channels (same batch and spatial size).
RefTensor concat_channels(const std::vector<const RefTensor*>& parts);
// (Named apart from concat_channels: a braced pair of pointers would make the overloads ambiguous.)
RefGrad concat_grads(const std::vector<const RefGrad*>& parts);
// Channels [begin, begin + count) of x.
RefTensor slice_channels(const RefTensor& x, int begin, int count);
RefGrad slice_grad(const RefGrad& x, int begin, int count);
// y += x (same shape), in float32 like the framework's residual add (float64 for gradients).
void add_inplace(RefTensor& y, const RefTensor& x);
void add_inplace(RefGrad& y, const RefGrad& x);

}  // namespace lab::reference
