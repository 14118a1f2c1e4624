// The seeded problem of the optimizer runners and tests (optim_problem.hpp).
#include "kernels/optim/optim_problem.hpp"

#include <string>

#include "kernels/compare.hpp"

namespace lab {

OptimProblem::OptimProblem(Backend& backend, int tensors, int size, int steps, uint64_t seed) {
  for (int i = 0; i < tensors; ++i) {
    counts.push_back(size + 97LL * i);
    groups.push_back(i % kOptimGroups);
    offsets.push_back(total);
    total += size_t(counts.back());
  }
  initial_param = random_uniform(total, -1.0f, 1.0f, derive_seed(seed, "param"));
  for (int s = 0; s < steps; ++s)
    grads.push_back(random_uniform(total, -1.0f, 1.0f, derive_seed(seed, "grad" + std::to_string(s))));
  initial_param_device = backend.upload_vector(initial_param);
  zeros_device = backend.upload_vector(std::vector<float>(total, 0.0f));
  for (const auto& g : grads) grads_device.push_back(backend.upload_vector(g));
}

std::vector<double> OptimProblem::slice(const std::vector<double>& flat, size_t i) const {
  return {flat.begin() + long(offsets[i]), flat.begin() + long(offsets[i] + size_t(counts[i]))};
}

std::vector<std::vector<double>> OptimProblem::step_gradients(int step) const {
  const std::vector<double> flat(grads[size_t(step)].begin(), grads[size_t(step)].end());
  std::vector<std::vector<double>> out;
  for (size_t i = 0; i < counts.size(); ++i) out.push_back(slice(flat, i));
  return out;
}

}  // namespace lab
