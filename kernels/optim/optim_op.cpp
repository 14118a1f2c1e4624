// The optimizer ops (optim_op.hpp): the device table, the host-side float64 parts of torch's step (bias
// corrections, 1 - lr*wd), and the launches.
#include "kernels/optim/optim_op.hpp"

#include <cmath>
#include <type_traits>

#include "nvrtc_runtime/errors.hpp"

namespace lab {
namespace {

int blocks_of(long long count) {
  return int((count + kOptimBlockElems - 1) / kOptimBlockElems);
}

int half_type_code(HalfType half) {
  return half == HalfType::bf16 ? 1 : 0;
}  // LAB_BF16 / LAB_F16

LaunchConfig list_launch(const OptimTensorList& list) {
  return {{unsigned(list.total_blocks()), 1, 1}, {unsigned(kOptimThreads), 1, 1}};
}

std::vector<OptimTensor> numbered(std::vector<OptimTensor> tensors) {
  if (tensors.empty()) throw UsageError("optimizer: the tensor list is empty");
  int total_blocks = 0;
  for (OptimTensor& t : tensors) {
    if (t.count < 1) throw UsageError("optimizer: a tensor of the list has no elements");
    if (t.group < 0 || t.group >= kOptimGroups)
      throw UsageError("optimizer: parameter group " + std::to_string(t.group) + " is not 0, 1 or 2");
    t.first_block = total_blocks;
    total_blocks += blocks_of(t.count);
  }
  return tensors;
}

}  // namespace

OptimTensorList::OptimTensorList(Backend& backend, std::vector<OptimTensor> tensors)
    : tensors_(numbered(std::move(tensors))),
      total_blocks_(tensors_.back().first_block + blocks_of(tensors_.back().count)),
      table_(backend.upload_vector(tensors_)) {}

OptimTensor in_place_tensor(float* param, float* grad, float* state0, float* state1, unsigned short* param16,
                            long long count, int group) {
  return {grad, grad, param, param, state0, state0, state1, state1, param16, nullptr, count, group, 0};
}

SgdStepParams step_params(const SgdSettings& s, int step, HalfType half) {
  SgdStepParams p{};
  for (int g = 0; g < kOptimGroups; ++g) {
    p.lr[g] = float(s.lr[size_t(g)]);
    p.weight_decay[g] = g == 0 ? float(s.weight_decay) : 0.0f;
  }
  p.momentum = float(s.momentum);
  p.first_step = step == 1 ? 1 : 0;
  p.half_type = half_type_code(half);
  return p;
}

AdamwStepParams step_params(const AdamwSettings& s, int step, HalfType half) {
  AdamwStepParams p{};
  const double bias1 = 1.0 - std::pow(s.beta1, step), bias2 = 1.0 - std::pow(s.beta2, step);
  for (int g = 0; g < kOptimGroups; ++g) {
    const double lr = s.lr[size_t(g)];
    p.decay_factor[g] = float(1.0 - lr * (g == 0 ? s.weight_decay : 0.0));
    p.step_size[g] = float(lr / bias1);
  }
  p.bias2_sqrt = float(std::sqrt(bias2));
  p.lerp_weight = float(1.0 - s.beta1);
  p.beta2 = float(s.beta2), p.one_minus_beta2 = float(1.0 - s.beta2), p.eps = float(s.eps);
  p.half_type = half_type_code(half);
  return p;
}

ClipGradNormOp::ClipGradNormOp(Backend& backend)
    : partials_(backend, clip_grad_norm_spec(), "v1_fp64_partials", "clip_grad_norm_partials"),
      finish_(backend, clip_grad_norm_spec(), "v1_fp64_partials", "clip_grad_norm_finish"),
      apply_(backend, clip_grad_norm_spec(), "v1_fp64_partials", "clip_grad_norm_apply") {}

void ClipGradNormOp::run(const OptimTensorList& list, float max_norm, float* total_norm, float* scale,
                         bool apply) {
  if (list.total_blocks() > partials_capacity_) {
    partials_buffer_ = partials_.backend().alloc(size_t(list.total_blocks()) * sizeof(double));
    partials_capacity_ = list.total_blocks();
  }
  double* partials = partials_buffer_.as<double>();
  partials_.launch(list_launch(list), ClipPartialsParams{list.device_table(), list.size(), partials});
  finish_.launch({{1, 1, 1}, {unsigned(kOptimThreads), 1, 1}},
                 ClipFinishParams{partials, list.total_blocks(), max_norm, total_norm, scale});
  if (apply) apply_.launch(list_launch(list), ClipApplyParams{list.device_table(), list.size(), scale});
}

template <class Settings>
OptimStepOp<Settings>::OptimStepOp(Backend& backend)
    : kernel_(std::is_same_v<Settings, SgdSettings>
                  ? CompiledKernel(backend, sgd_step_spec(), "v1_nesterov", "sgd_step_nesterov")
                  : CompiledKernel(backend, adamw_step_spec(), "v1", "adamw_step")) {}

template <class Settings>
void OptimStepOp<Settings>::step(const OptimTensorList& list, const Settings& s, int step, HalfType half,
                                 const float* gate) {
  auto p = step_params(s, step, half);
  p.tensors = list.device_table(), p.n_tensors = list.size(), p.gate = gate;
  kernel_.launch(list_launch(list), p);
}

template class OptimStepOp<SgdSettings>;
template class OptimStepOp<AdamwSettings>;

}  // namespace lab
