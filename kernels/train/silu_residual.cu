// silu_residual: y = silu(z) (+ residual) (or z + residual without SiLU), one thread per element (block
// nn::kThreads), with the conv epilogue's own formula (nn::store_output_at). The batch-statistics training
// forward (gradient_tape_batchnorm.cpp) takes a conv's y = act(z) + residual here from its normalised z; a
// conv without BatchNorm statistics writes y and z from its own epilogue (Conv2dOp::run's `pre`).
#include "common/lab.cuh"
#include "nn/nn_common.cuh"
#include "train/silu_residual_params.cuh"

__global__ void __launch_bounds__(nn::kThreads) silu_residual(const lab::SiluResidualParams p) {
  const long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= p.count) return;
  nn::store_output_at<false>(p.z[i], 0.0f, p.silu, p.residual ? p.residual + i : nullptr, nullptr, nullptr,
                             p.y + i, 0);
}
