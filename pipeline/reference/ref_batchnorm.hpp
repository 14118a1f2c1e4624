// The reference executor's batch-statistics BatchNorm (a conv marked batch_statistics): its forward from
// the conv's unnormalised output u and its backward down to u, through the float64 formulas of
// kernels/train/batchnorm_batch_reference.hpp.
#pragma once
#include "pipeline/model/yolo26_model.hpp"
#include "pipeline/reference/ref_backward_ops.hpp"
#include "pipeline/reference/ref_tensor.hpp"

namespace lab::reference {

// z = gamma (u - mean) / sqrt(var + eps) + beta with u's per-channel batch mean and biased variance
// (float32 like every activation; SiLU is the caller's). UsageError naming the conv when a channel has one
// value (batch 1 with 1x1 maps).
RefTensor batchnorm_batch_forward(const ConvSpec& spec, const RefTensor& u);

// d loss / d u from d loss / d y (y = act(z), the conv's output), the batch statistics' terms included;
// adds d bn.weight and d bn.bias to grads[spec.name].gamma / .beta and keeps u's statistics in its .batch.
RefGrad batchnorm_batch_backward(const ConvSpec& spec, const RefTensor& u, const RefGrad& dy,
                                 ConvGradients& grads);

}  // namespace lab::reference
