// Precision names.
#include "kernels/nn/precision.hpp"

namespace lab {

std::string precision_name(Precision p) {
  switch (p) {
    case Precision::Tf32:
      return "tf32";
    case Precision::Fp16:
      return "fp16";
    case Precision::Bf16:
      return "bf16";
    case Precision::Fp32:
      break;
  }
  return "fp32";
}

std::optional<Precision> parse_precision(const std::string& name) {
  for (Precision p : kPrecisions)
    if (precision_name(p) == name) return p;
  return std::nullopt;
}

}  // namespace lab
