// Parameters of the optimizer kernels (clip_grad_norm.cu, optim_step.cu), shared by the kernels and the host
// that launches them: plain data, passed by value. Every kernel runs once over a whole list of float32
// tensors through a table of OptimTensor in device memory; block b works on elements of the tensor t whose
// [first_block, first_block + ceil(count / kOptimBlockElems)) holds b (found by binary search).
#pragma once

namespace lab {

constexpr int kOptimThreads = 256;  // threads per block of every optimizer kernel
constexpr int kOptimPerThread = 8;  // elements per thread
constexpr int kOptimBlockElems = kOptimThreads * kOptimPerThread;  // elements one block covers

// Ultralytics' parameter groups (build_optimizer): 0 = weights with decay, 1 = norm weights (no decay),
// 2 = biases (no decay, their own learning rate during warm-up).
constexpr int kOptimGroups = 3;

// One tensor of the list. `*_in` are read, the plain pointers written; the training op passes the same
// buffer for both (an in-place update), the runners a pristine input for the first step.
struct OptimTensor {
  const float* grad_in;     // [count] gradient
  float* grad;              // [count] clip_grad_norm_apply writes the scaled gradient here
  const float* param_in;    // [count] float32 master weights before the step
  float* param;             // [count] after the step
  const float* state0_in;   // [count] SGD momentum buffer / AdamW exp_avg, before the step
  float* state0;            // [count] after
  const float* state1_in;   // [count] AdamW exp_avg_sq before (unused by SGD)
  float* state1;            // [count] after
  unsigned short* param16;  // [count] optional 16-bit copy of the updated weights (nullptr: none)
  float* muon_update;  // [count] MuSGD: scratch for the Muon update of a tensor that takes one, else nullptr
  long long count;     // elements
  int group;           // 0, 1 or 2 (above)
  int first_block;     // the first block of the launch that works on this tensor
};

// Pass 1 of the gradient norm: partials[b] = sum of grad^2 over block b's elements, in float64.
struct ClipPartialsParams {
  const OptimTensor* tensors;  // [n_tensors]
  int n_tensors;
  double* partials;  // [gridDim.x]
};

// Pass 2 (one block): total = sqrt(sum of partials) in a fixed order; scale = max_norm / (total + 1e-6),
// clamped to at most 1 (torch.nn.utils.clip_grad_norm_).
struct ClipFinishParams {
  const double* partials;  // [n_partials]
  int n_partials;
  float max_norm;
  float* total_norm;  // [1]
  float* scale;       // [1]
};

// Pass 3: grad = grad_in * scale for every tensor.
struct ClipApplyParams {
  const OptimTensor* tensors;  // [n_tensors]
  int n_tensors;
  const float* scale;  // [1], from pass 2
};

// torch.optim.SGD(momentum, nesterov=True, dampening 0): d = g + wd*p (wd of the group), buf = d on step 1
// else momentum*buf + d, p -= lr * (d + momentum*buf).
struct SgdStepParams {
  const OptimTensor* tensors;  // [n_tensors]
  int n_tensors;
  float lr[kOptimGroups];
  float weight_decay[kOptimGroups];
  float momentum;
  int first_step;  // 1 on the first step (the buffer starts as d)
  int half_type;   // LAB_F16 or LAB_BF16, for param16
  // [1] or nullptr: when set and not finite (fp16 training's overflowed gradient norm, clip_grad_norm's
  // total_norm), the launch writes nothing: GradScaler's skipped step, decided on the device.
  const float* gate;
};

// torch.optim.AdamW (no amsgrad): p *= decay_factor (1 - lr*wd of the group); m = lerp(m, g, 1 - beta1);
// v = beta2*v + (1 - beta2)*g^2; p -= step_size * m / (sqrt(v) / bias2_sqrt + eps), step_size =
// lr / (1 - beta1^step), bias2_sqrt = sqrt(1 - beta2^step), and 1 - beta1, 1 - beta2 computed on the host
// in float64 as torch does (1 - 0.999f in float32 would be 1.3e-5 off).
struct AdamwStepParams {
  const OptimTensor* tensors;  // [n_tensors]
  int n_tensors;
  float decay_factor[kOptimGroups];
  float step_size[kOptimGroups];
  float bias2_sqrt;
  float lerp_weight;  // 1 - beta1
  float beta2, one_minus_beta2, eps;
  int half_type;  // LAB_F16 or LAB_BF16, for param16
  // [1] or nullptr: when set and not finite (fp16 training's overflowed gradient norm, clip_grad_norm's
  // total_norm), the launch writes nothing: GradScaler's skipped step, decided on the device.
  const float* gate;
};

// MuSGD (Ultralytics' ultralytics/optim/muon.py). A tensor with muon_update set (a weight of two or more
// dimensions) takes, per step: musgd_muon_momentum  m = lerp(m, g, 1 - momentum) (state1),
// muon_update = lerp(g, m, momentum); the host orthogonalises muon_update (MuonOrthogonalizeOp); then
// musgd_apply  p -= lr * muon * muon_update; d = g + wd * p; buf = momentum * buf + d (state0, zero at
// start); p -= lr * sgd * (d + momentum * buf). Every other tensor: the SGD (Nesterov) step with factor 1.
struct MusgdStepParams {
  const OptimTensor* tensors;  // [n_tensors]
  int n_tensors;
  float lr[kOptimGroups];       // the SGD step of the tensors without Muon
  float muon_lr[kOptimGroups];  // lr * muon and lr * sgd of the Muon tensors (host float64, as torch's alpha)
  float sgd_lr[kOptimGroups];
  float weight_decay[kOptimGroups];
  float momentum;
  float lerp_weight;  // 1 - momentum, from the host's float64
  int half_type;      // LAB_F16 or LAB_BF16, for param16
  // [1] or nullptr: when set and not finite (fp16 training's overflowed gradient norm, clip_grad_norm's
  // total_norm), the launch writes nothing: GradScaler's skipped step, decided on the device.
  const float* gate;
};

}  // namespace lab
