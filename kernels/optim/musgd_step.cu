// musgd_step: the element-wise halves of Ultralytics' MuSGD step (optim_params.cuh has the formulas) over a
// list of float32 tensors, one launch each; between them the host orthogonalises each Muon tensor's update
// (muon_newton_schulz.cu). Grid = the table's total blocks, block = kOptimThreads, 8 strided elements per
// thread, as optim_step.cu, gated alike (a set gate that is not finite: nothing written).
//   musgd_muon_momentum  the Muon tensors' momentum (state1) and Nesterov input (muon_update); the others
//   skip musgd_apply          the Muon part and the SGD part on the Muon tensors; plain SGD (Nesterov)
//   elsewhere
#include "optim/optim_common.cuh"

__global__ void musgd_muon_momentum(const lab::MusgdStepParams p) {
  if (!optim_step_taken(p.gate)) return;
  const int block = int(blockIdx.x);
  const lab::OptimTensor t = p.tensors[optim_tensor_of_block(p.tensors, p.n_tensors, block)];
  if (!t.muon_update) return;
  long long begin, end;
  optim_block_range(t, block, begin, end);
  for (long long i = begin + threadIdx.x; i < end; i += lab::kOptimThreads) {
    const float g = t.grad_in[i], m_old = t.state1_in[i];
    const float m = m_old + p.lerp_weight * (g - m_old);
    t.state1[i] = m;
    t.muon_update[i] = g + p.momentum * (m - g);
  }
}

__global__ void musgd_apply(const lab::MusgdStepParams p) {
  if (!optim_step_taken(p.gate)) return;
  const int block = int(blockIdx.x);
  const lab::OptimTensor t = p.tensors[optim_tensor_of_block(p.tensors, p.n_tensors, block)];
  long long begin, end;
  optim_block_range(t, block, begin, end);
  const float wd = p.weight_decay[t.group], momentum = p.momentum, muon_lr = p.muon_lr[t.group];
  const float sgd_lr = t.muon_update ? p.sgd_lr[t.group] : p.lr[t.group];
  for (long long i = begin + threadIdx.x; i < end; i += lab::kOptimThreads) {
    float w = t.param_in[i];
    if (t.muon_update) w -= muon_lr * t.muon_update[i];
    const float d = t.grad_in[i] + wd * w;
    const float buf = t.state0_in[i] * momentum + d;
    const float updated = w - sgd_lr * (d + momentum * buf);
    t.state0[i] = buf;
    t.param[i] = updated;
    if (t.param16) t.param16[i] = optim_to_16bit(updated, p.half_type);
  }
}
