// The --precision option: a known name, or a one-line usage error (exit 2).
#include "lab/precision_option.hpp"

#include "nvrtc_runtime/errors.hpp"

namespace lab {

Precision precision_option(const std::string& value) {
  if (std::optional<Precision> p = parse_precision(value)) return *p;
  throw UsageError("--precision " + value + ": unknown (valid: " + kPrecisionNames + ")");
}

}  // namespace lab
