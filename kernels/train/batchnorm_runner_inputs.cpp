// batchnorm_runner_inputs (batchnorm_runner_inputs.hpp): each tensor from its own labelled seed.
#include "kernels/train/batchnorm_runner_inputs.hpp"

#include "kernels/compare.hpp"

namespace lab {

BatchNormRunnerInputs batchnorm_runner_inputs(const BatchNormLayout& layout, uint64_t seed) {
  const size_t n = layout.size(), c = size_t(layout.channels);
  const auto seeded = [&](size_t count, float lo, float hi, const char* label) {
    return random_uniform(count, lo, hi, derive_seed(seed, label));
  };
  BatchNormRunnerInputs in;
  const std::vector<float> offset = seeded(c, -1.0f, 1.0f, "offset"), spread = seeded(c, 0.5f, 3.0f, "spread");
  in.x = seeded(n, -1.0f, 1.0f, "x");
  for (size_t i = 0; i < n; ++i) {
    const size_t k = (i / size_t(layout.plane)) % c;
    in.x[i] = offset[k] + spread[k] * in.x[i];
  }
  in.dy = seeded(n, -1.0f, 1.0f, "dy");
  in.gamma = seeded(c, 0.2f, 2.0f, "gamma"), in.beta = seeded(c, -1.0f, 1.0f, "beta");
  in.running_mean = seeded(c, -0.5f, 0.5f, "running_mean"), in.running_var = seeded(c, 0.1f, 2.0f, "running_var");
  return in;
}

}  // namespace lab
