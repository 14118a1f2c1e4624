// Which optimizer `lab train --optimizer NAME` builds, with Ultralytics' rules (BaseTrainer in
// ultralytics/engine/trainer.py, 8.4): `auto` picks from the run's length and the class count; the weight
// decay and the iteration count the rule reads are scaled by the nominal batch. Pure host code.
#pragma once
#include <string>

namespace lab {

struct OptimizerChoice {
  std::string name;                  // "SGD", "AdamW" or "MuSGD"
  double lr = 0;                     // lr0 of every group
  double momentum = 0;               // SGD momentum / AdamW beta1
  bool zero_warmup_bias_lr = false;  // `auto` sets warmup_bias_lr = 0 ("no higher than 0.01 for Adam")
};

// `name` as given ("auto", "SGD", "AdamW", "MuSGD"; any letter case). auto: more than 10000 iterations ->
// MuSGD, lr 0.01, momentum 0.9; else AdamW, lr round(0.002 * 5 / (4 + nc), 6), momentum 0.9. Otherwise the
// named optimizer with lr0 and momentum as given. Throws UsageError naming the valid names.
OptimizerChoice choose_optimizer(const std::string& name, double lr0, double momentum, long long iterations,
                                 int class_count);

// Gradient accumulation to the nominal batch: max(round(nbs / batch), 1), rounding half to even as Python.
int nominal_accumulation(int batch, int nominal_batch);
// The iterations `auto` reads: ceil(train_images / max(batch, nbs)) * epochs.
long long auto_rule_iterations(long long train_images, int batch, int nominal_batch, int epochs);
// Group 0's decay: weight_decay * batch * accumulate / nbs.
double scaled_weight_decay(double weight_decay, int batch, int nominal_batch);

}  // namespace lab
