// The optimizer as the training loop calls it: a list of float32 master weights with their gradients and
// state, each tagged with its Ultralytics parameter group, in one device table; gradient-norm clipping and
// the SGD (Nesterov) and AdamW steps over the whole list, one launch per pass (optim_params.cuh).
#pragma once
#include <array>
#include <optional>
#include <vector>

#include "kernels/common/half_type.hpp"
#include "kernels/compiled_kernel.hpp"
#include "kernels/optim/optim_params.cuh"

namespace lab {

const KernelSpec& clip_grad_norm_spec();
const KernelSpec& sgd_step_spec();
const KernelSpec& adamw_step_spec();

// The tensor table on the device. Entries come with their pointers, count and group; the list numbers
// their blocks (first_block) in order and uploads the table.
class OptimTensorList {
 public:
  OptimTensorList(Backend& backend, std::vector<OptimTensor> tensors);
  const OptimTensor* device_table() const { return table_.as<const OptimTensor>(); }
  int size() const { return int(tensors_.size()); }
  int total_blocks() const { return total_blocks_; }
  const std::vector<OptimTensor>& tensors() const { return tensors_; }

 private:
  std::vector<OptimTensor> tensors_;
  int total_blocks_ = 0;
  DeviceBuffer table_;
};

// One in-place entry (the *_in pointers equal the written ones); state1 only for AdamW, param16 optional.
OptimTensor in_place_tensor(float* param, float* grad, float* state0, float* state1, unsigned short* param16,
                            long long count, int group);

// Per-group learning rates (Ultralytics' warm-up moves the biases' one apart) and the decay of group 0.
struct SgdSettings {
  std::array<double, kOptimGroups> lr{0.01, 0.01, 0.01};
  double momentum = 0.937;
  double weight_decay = 5e-4;  // group 0 only
};
struct AdamwSettings {
  std::array<double, kOptimGroups> lr{0.001, 0.001, 0.001};
  double beta1 = 0.937;  // Ultralytics passes its momentum as beta1
  double beta2 = 0.999;
  double eps = 1e-8;
  double weight_decay = 5e-4;  // group 0 only
};

// The launch structs of step `step` (1-based), tensors unset: the host-side float64 parts of torch's step.
SgdStepParams step_params(const SgdSettings& s, int step, HalfType half);
AdamwStepParams step_params(const AdamwSettings& s, int step, HalfType half);

// clip_grad_norm_(max_norm): total_norm[0] and scale[0] (device floats) and, when `apply`, grad = grad_in *
// scale for every tensor.
class ClipGradNormOp {
 public:
  explicit ClipGradNormOp(Backend& backend);
  void run(const OptimTensorList& list, float max_norm, float* total_norm, float* scale, bool apply = true);

 private:
  CompiledKernel partials_, finish_, apply_;
  DeviceBuffer partials_buffer_;
  int partials_capacity_ = 0;
};

// One optimizer step over the list, of the kind its settings name: SgdOp (sgd_step_nesterov) or AdamwOp
// (adamw_step). `step` counts from 1; `half` is the type of the tensors' param16 copies; `gate` (a device
// float, e.g. ClipGradNormOp's total_norm) set: the step writes nothing when it is not finite.
template <class Settings>
class OptimStepOp {
 public:
  explicit OptimStepOp(Backend& backend);
  void step(const OptimTensorList& list, const Settings& s, int step, HalfType half = HalfType::f16,
            const float* gate = nullptr);

 private:
  CompiledKernel kernel_;
};
using SgdOp = OptimStepOp<SgdSettings>;
using AdamwOp = OptimStepOp<AdamwSettings>;

}  // namespace lab
