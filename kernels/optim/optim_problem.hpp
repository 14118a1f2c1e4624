// The seeded problem of the optimizer runners and tests: a list of float32 tensors (SIZE + 97*i elements,
// groups 0, 1, 2 in turn) laid out back to back in one buffer, with their initial weights and one gradient
// per step, on the host and on the device.
#pragma once
#include <cstdint>
#include <vector>

#include "kernels/optim/optim_op.hpp"

namespace lab {

struct OptimProblem {
  OptimProblem(Backend& backend, int tensors, int size, int steps, uint64_t seed);
  // The elements of tensor i within a flat array of the whole list.
  std::vector<double> slice(const std::vector<double>& flat, size_t i) const;
  // Each tensor's slice of step `step`'s gradient (0-based), in float64.
  std::vector<std::vector<double>> step_gradients(int step) const;
  size_t tensors_count() const { return counts.size(); }

  std::vector<long long> counts;
  std::vector<int> groups;
  std::vector<size_t> offsets;  // of each tensor in the flat arrays
  size_t total = 0;             // elements of the list
  std::vector<float> initial_param;
  std::vector<std::vector<float>> grads;  // [steps][total]
  DeviceBuffer initial_param_device, zeros_device;
  std::vector<DeviceBuffer> grads_device;
};

}  // namespace lab
