// Ultralytics' ModelEMA: an exponential moving average of every float parameter and buffer of the model
// (each conv's checkpoint parameters and its BatchNorm's running statistics), updated after each optimizer
// step with decay d = 0.9999 * (1 - exp(-updates / 2000)) (ema = d * ema + (1 - d) * model); the EMA model
// is what `lab train` validates and saves. Its folded weights follow its parameters (refolded each update).
#pragma once
#include "pipeline/model/yolo26_model.hpp"

namespace lab::train {

class ModelEma {
 public:
  // Starts as a copy of `model`, `updates` updates already taken (a resumed run's).
  explicit ModelEma(Yolo26Model model, long long updates = 0);
  // The decay of update number `updates` (1 for the first).
  static double decay(long long updates);
  // One update towards `model` (the same network: every tensor of the same size, else RuntimeError).
  void update(const Yolo26Model& model);
  const Yolo26Model& model() const { return ema_; }
  long long updates() const { return updates_; }

 private:
  Yolo26Model ema_;
  long long updates_ = 0;
};

}  // namespace lab::train
