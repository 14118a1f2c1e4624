// LossScaler: the update rule of PyTorch's GradScaler for fp16 training. The loss's gradient is multiplied by
// the scale (2^16 at the start) so that the small gradients of the backward's fp16 products do not flush to
// zero; the gradients are unscaled (divided by it again) before the gradient norm is clipped; a step whose
// gradients hold an inf or a NaN is skipped and halves the scale, and 2000 finite steps in a row double it.
// The check itself runs on the device (DeviceTrainEngine: the clip pass's gradient norm is finite exactly
// when every gradient is); this class only keeps the state and decides. bf16 needs none of it: its 8-bit
// exponent spans float32's range, so a gradient float32 can hold does not underflow in bf16.
#pragma once

namespace lab::train {

// The scaler's state, saved with the optimizer's for --resume.
struct LossScaleState {
  double scale = 65536.0;        // 2^16, GradScaler's init_scale
  long long growth_tracker = 0;  // finite steps since the scale last changed (or overflowed)
  long long skipped_steps = 0;   // optimizer steps skipped on a non-finite gradient, over the run
  bool operator==(const LossScaleState&) const = default;
};

class LossScaler {
 public:
  static constexpr double kGrowthFactor = 2.0, kBackoffFactor = 0.5;
  static constexpr long long kGrowthInterval = 2000;

  explicit LossScaler(const LossScaleState& state = {}) : state_(state) {}
  double scale() const { return state_.scale; }
  const LossScaleState& state() const { return state_; }
  // After a backward: `finite` whether every gradient was. Returns whether the optimizer step is taken, and
  // moves the scale as GradScaler.update does.
  bool update(bool finite);

 private:
  LossScaleState state_;
};

}  // namespace lab::train
