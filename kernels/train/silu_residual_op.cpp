// The silu_residual spec and its launch.
#include "kernels/train/silu_residual_op.hpp"

#include "kernels/train/silu_residual_params.cuh"

namespace lab {

const KernelSpec& silu_residual_spec() {
  using K = ParamSpec::Kind;
  static const KernelSpec spec{
      .name = "silu_residual",
      .family = "train",
      .description = "y = silu(z) (+ residual): a conv's activation from its kept pre-activation",
      .source = "train/silu_residual.cu",
      .variants = {{"v1_element", "one thread per element, the conv epilogue's formula"}},
      .params = {{"N", K::Int, "100003", "elements", 1, 1 << 28},
                 {"RESIDUAL", K::Int, "1", "1: add a residual", 0, 1},
                 {"SILU", K::Int, "1", "1: SiLU, 0: identity", 0, 1}},
      .entries = {"silu_residual"}};
  return spec;
}

SiluResidualOp::SiluResidualOp(Backend& backend)
    : kernel_(backend, silu_residual_spec(), "v1_element", "silu_residual") {}

void SiluResidualOp::run(long long count, const float* z, const float* residual, float* y, bool silu) const {
  constexpr long long kBlock = 256;  // nn::kThreads, the kernel's launch bound
  const LaunchConfig cfg{{unsigned((count + kBlock - 1) / kBlock), 1, 1}, {unsigned(kBlock), 1, 1}};
  kernel_.launch(cfg, SiluResidualParams{z, residual, y, count, silu ? 1 : 0});
}

}  // namespace lab
