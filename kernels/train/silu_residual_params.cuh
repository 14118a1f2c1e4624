// Parameters of silu_residual (silu_residual.cu), shared by the kernel and the host that launches it.
#pragma once

namespace lab {

// y = act(z) (+ residual) over `count` dense float32 elements, act SiLU or the identity.
struct SiluResidualParams {
  const float* z;         // [count] a conv's pre-activation (its output without activation and residual)
  const float* residual;  // [count] or null
  float* y;               // [count]
  long long count;
  int silu;  // 1: SiLU, 0: identity
};

}  // namespace lab
