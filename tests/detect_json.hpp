// The `images` array of a `lab detect --json` file without each image's `times_ms`, so two runs' detections
// can be compared whole (their timings always differ).
#pragma once
#include <nlohmann/json.hpp>

namespace lab::test {

inline nlohmann::json without_times(nlohmann::json images) {
  for (auto& image : images) image.erase("times_ms");
  return images;
}

}  // namespace lab::test
