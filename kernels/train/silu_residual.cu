// silu_residual: y = silu(z) (+ residual) (or z + residual without SiLU), one thread per element (block
// nn::kThreads). The training forward runs a conv once without its activation, keeping z for the SiLU
// backward, and takes y from z here with the conv epilogue's own formula (nn::store_output), so y equals the
// fused conv's output.
#include "common/lab.cuh"
#include "nn/nn_common.cuh"
#include "train/silu_residual_params.cuh"

__global__ void __launch_bounds__(nn::kThreads) silu_residual(const lab::SiluResidualParams p) {
  const long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= p.count) return;
  nn::store_output(p.z[i], 0.0f, p.silu, p.residual ? p.residual + i : nullptr, 0, 0, p.y + i, 0, 0, 0, 0, 0);
}
