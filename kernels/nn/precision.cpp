// Precision names.
#include "nn/precision.hpp"

namespace lab {

std::string precision_name(Precision p) {
  return p == Precision::Tf32 ? "tf32" : "fp32";
}

std::optional<Precision> parse_precision(const std::string& name) {
  for (Precision p : {Precision::Fp32, Precision::Tf32})
    if (precision_name(p) == name) return p;
  return std::nullopt;
}

}  // namespace lab
