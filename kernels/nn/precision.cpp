// Precision names.
#include "kernels/nn/precision.hpp"

namespace lab {

std::string precision_name(Precision p) {
  constexpr const char* kNames[] = {"fp32", "tf32", "fp16", "bf16"};  // in Precision order
  return kNames[int(p)];
}

std::optional<Precision> parse_precision(const std::string& name) {
  for (Precision p : kPrecisions)
    if (precision_name(p) == name) return p;
  return std::nullopt;
}

}  // namespace lab
