// sgd_step / adamw_step: one optimizer step over a list of float32 master weights in one launch each, as
// torch.optim.SGD(nesterov=True) and torch.optim.AdamW compute it per element (optim_params.cuh has the
// formulas), with Ultralytics' three parameter groups (per-group lr; weight decay on group 0 only, through
// the host's per-group values). Grid = the table's total blocks, block = kOptimThreads; each thread updates
// kOptimPerThread elements, strided by the block so that every access is coalesced. When param16 is set the
// updated weight is also written rounded to fp16 / bf16 (for a 16-bit forward). A set gate that is not finite
// (fp16 training's overflowed gradient norm) makes the launch write nothing. Saves nothing (the state
// buffers are the optimizer state). One variant each.
#include "optim/optim_common.cuh"

__global__ void sgd_step_nesterov(const lab::SgdStepParams p) {
  if (!optim_step_taken(p.gate)) return;
  const int block = int(blockIdx.x);
  const lab::OptimTensor t = p.tensors[optim_tensor_of_block(p.tensors, p.n_tensors, block)];
  long long begin, end;
  optim_block_range(t, block, begin, end);
  const float lr = p.lr[t.group], wd = p.weight_decay[t.group], momentum = p.momentum;
  for (long long i = begin + threadIdx.x; i < end; i += lab::kOptimThreads) {
    const float w = t.param_in[i];
    const float d = t.grad_in[i] + wd * w;
    const float buf = p.first_step ? d : t.state0_in[i] * momentum + d;
    const float updated = w - lr * (d + momentum * buf);
    t.state0[i] = buf;
    t.param[i] = updated;
    if (t.param16) t.param16[i] = optim_to_16bit(updated, p.half_type);
  }
}

__global__ void adamw_step(const lab::AdamwStepParams p) {
  if (!optim_step_taken(p.gate)) return;
  const int block = int(blockIdx.x);
  const lab::OptimTensor t = p.tensors[optim_tensor_of_block(p.tensors, p.n_tensors, block)];
  long long begin, end;
  optim_block_range(t, block, begin, end);
  const float decay = p.decay_factor[t.group], step_size = p.step_size[t.group];
  for (long long i = begin + threadIdx.x; i < end; i += lab::kOptimThreads) {
    const float g = t.grad_in[i];
    const float m_old = t.state0_in[i];
    const float m = m_old + p.lerp_weight * (g - m_old);
    const float v = t.state1_in[i] * p.beta2 + p.one_minus_beta2 * g * g;
    const float denom = sqrtf(v) / p.bias2_sqrt + p.eps;
    const float updated = t.param_in[i] * decay - step_size * (m / denom);
    t.state0[i] = m;
    t.state1[i] = v;
    t.param[i] = updated;
    if (t.param16) t.param16[i] = optim_to_16bit(updated, p.half_type);
  }
}
