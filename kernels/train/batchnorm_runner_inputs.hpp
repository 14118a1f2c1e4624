// The seeded inputs of the batch-statistics BatchNorm runners (batchnorm_batch, batchnorm_sync): a dense
// [batch, channels, plane] input whose channels each have their own offset and spread (so that the mean
// matters), an upstream gradient of the same shape, and per channel gamma, beta and running statistics.
#pragma once
#include <cstdint>
#include <vector>

#include "kernels/train/batchnorm_batch_reference.hpp"

namespace lab {

struct BatchNormRunnerInputs {
  std::vector<float> x, dy;                                    // [batch, channels, plane]
  std::vector<float> gamma, beta, running_mean, running_var;  // [channels]
};

BatchNormRunnerInputs batchnorm_runner_inputs(const BatchNormLayout& layout, uint64_t seed);

}  // namespace lab
