// The learning-rate, momentum and accumulation schedule of `lab train`, as Ultralytics' BaseTrainer runs it:
// a warm-up over nw = max(round(warmup_epochs * batches_per_epoch), 100) iterations (np.interp from iteration
// 0 to nw: the bias group's lr from warmup_bias_lr down, the other groups' from 0 up, each to lr0 *
// lf(epoch); SGD's momentum from warmup_momentum up to momentum; the accumulation from 1 up to nbs / batch),
// then the linear decay lf(e) = max(1 - e / epochs, 0) * (1 - lrf) + lrf, stepped once per epoch.
#pragma once
#include <array>

#include "pipeline/train/train_engine.hpp"

namespace lab::train {

// Group 2 of StepHyper (the biases) is the one warmed up from warmup_bias_lr.
constexpr int kBiasGroup = 2;

struct ScheduleSettings {
  int epochs = 100;
  long long batches_per_epoch = 1;
  int batch = 16, nbs = 64;
  double lr0 = 0.01, lrf = 0.01, momentum = 0.937;
  double warmup_epochs = 3, warmup_momentum = 0.8, warmup_bias_lr = 0.1;
  bool warmup_momentum_applies = true;  // false for AdamW (its groups have no "momentum" to warm up)
};

struct ScheduledStep {
  std::array<double, kParameterGroups> lr{};
  double momentum = 0;
  int accumulate = 1;  // batches per optimizer step at this iteration
};

class LrSchedule {
 public:
  explicit LrSchedule(const ScheduleSettings& settings);
  // The warm-up's length in iterations; -1 without warm-up (warmup_epochs 0).
  long long warmup_iterations() const { return warmup_; }
  // The decay factor of epoch `epoch` (0-based).
  double lf(int epoch) const;
  // The settings of iteration `batch_index` of epoch `epoch` (iteration ni = batch_index + nb * epoch).
  ScheduledStep at(int epoch, long long batch_index) const;

 private:
  ScheduleSettings s_;
  long long warmup_ = -1;
};

}  // namespace lab::train
