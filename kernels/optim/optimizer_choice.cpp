// Ultralytics' optimizer choice and nominal-batch scaling (optimizer_choice.hpp).
#include "kernels/optim/optimizer_choice.hpp"

#include <algorithm>
#include <cctype>
#include <cmath>

#include "nvrtc_runtime/errors.hpp"

namespace lab {
namespace {

std::string lowered(std::string s) {
  for (char& c : s) c = char(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

}  // namespace

OptimizerChoice choose_optimizer(const std::string& name, double lr0, double momentum, long long iterations,
                                 int class_count) {
  const std::string key = lowered(name);
  if (key == "auto") {
    if (iterations > 10000) return {"MuSGD", 0.01, 0.9, true};
    const double lr_fit = std::round(0.002 * 5 / (4 + class_count) * 1e6) / 1e6;
    return {"AdamW", lr_fit, 0.9, true};
  }
  for (const char* known : {"SGD", "AdamW", "MuSGD"})
    if (key == lowered(known)) return {known, lr0, momentum, false};
  throw UsageError("--optimizer " + name + " is not one of auto, SGD, AdamW, MuSGD");
}

int nominal_accumulation(int batch, int nominal_batch) {
  return std::max(int(std::nearbyint(double(nominal_batch) / double(batch))), 1);
}

long long auto_rule_iterations(long long train_images, int batch, int nominal_batch, int epochs) {
  const long long per_epoch = std::max(batch, nominal_batch);
  return (train_images + per_epoch - 1) / per_epoch * epochs;
}

double scaled_weight_decay(double weight_decay, int batch, int nominal_batch) {
  return weight_decay * batch * nominal_accumulation(batch, nominal_batch) / nominal_batch;
}

}  // namespace lab
