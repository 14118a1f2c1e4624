// The ranges of the augmentation settings.
#include "pipeline/train/augment_settings.hpp"

#include <sstream>
#include <string>

#include "nvrtc_runtime/errors.hpp"

namespace lab::train {
namespace {

void require_range(double value, const char* option, double low, double high) {
  if (value >= low && value <= high) return;  // false for NaN too
  std::ostringstream s;
  s << "--" << option << " " << value << ": must be in [" << low << ", " << high << "]";
  throw UsageError(s.str());
}

}  // namespace

void check_augment_settings(const AugmentSettings& a) {
  const std::pair<const char*, double> fractions[] = {{"hsv-h", a.hsv_h},
                                                      {"hsv-s", a.hsv_s},
                                                      {"hsv-v", a.hsv_v},
                                                      {"translate", a.translate},
                                                      {"scale", a.scale},
                                                      {"fliplr", a.fliplr},
                                                      {"perspective", a.perspective},
                                                      {"mosaic", a.mosaic}};
  for (const auto& [option, value] : fractions) require_range(value, option, 0, 1);
  require_range(a.degrees, "degrees", -180, 180);
  require_range(a.shear, "shear", -180, 180);
  if (a.close_mosaic < 0)
    throw UsageError("--close-mosaic " + std::to_string(a.close_mosaic) + ": must be at least 0");
}

}  // namespace lab::train
