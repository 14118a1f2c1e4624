// LossScaler::update: GradScaler's _amp_update_scale_ on the host.
#include "pipeline/train/loss_scaler.hpp"

#include <cmath>

namespace lab::train {

bool LossScaler::update(bool finite) {
  if (!finite) {
    state_.scale *= kBackoffFactor;
    state_.growth_tracker = 0;
    ++state_.skipped_steps;
    return false;
  }
  if (++state_.growth_tracker == kGrowthInterval) {
    const double grown = state_.scale * kGrowthFactor;
    if (std::isfinite(grown)) state_.scale = grown;
    state_.growth_tracker = 0;
  }
  return true;
}

}  // namespace lab::train
