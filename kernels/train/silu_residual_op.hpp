// SiluResidualOp: y = silu(z) (+ residual) (or z + residual) on dense float32 tensors (silu_residual.cu): the
// activation and residual of a batch-statistics conv from its normalised pre-activation.
#pragma once
#include "kernels/compiled_kernel.hpp"

namespace lab {

// Spec silu_residual (family train): one entry; parameters N (elements) and RESIDUAL of the runner.
const KernelSpec& silu_residual_spec();

class SiluResidualOp {
 public:
  explicit SiluResidualOp(Backend& backend);
  // y[i] = act(z[i]) (+ residual[i] when residual is not null), i < count; act SiLU when `silu`, else the
  // identity.
  void run(long long count, const float* z, const float* residual, float* y, bool silu) const;

 private:
  CompiledKernel kernel_;
};

}  // namespace lab
