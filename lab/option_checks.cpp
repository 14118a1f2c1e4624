// Validators over the option's text, before CLI11 converts it (so a huge value cannot wrap around).
#include "lab/option_checks.hpp"

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <string>

namespace lab {
namespace {

CLI::Validator bounded(long long min, long long max, std::string rule) {
  return CLI::Validator(
      [min, max, rule](std::string& text) -> std::string {
        char* end = nullptr;
        errno = 0;
        const long long value = std::strtoll(text.c_str(), &end, 10);
        if (text.empty() || *end != '\0') return "must be a whole number (got '" + text + "')";
        if (errno == ERANGE)  // beyond 64 bits: say both ends, "at least 0" alone would read oddly
          return "must be between " + std::to_string(min) + " and " + std::to_string(max) + " (got " + text + ")";
        if (value < min || value > max) return "must be " + rule + " (got " + text + ")";
        return "";
      },
      rule);
}

}  // namespace

CLI::Validator at_least(long long min) {
  return bounded(min, std::numeric_limits<long long>::max(), "at least " + std::to_string(min));
}

CLI::Validator in_range(long long min, long long max) {
  return bounded(min, max, "between " + std::to_string(min) + " and " + std::to_string(max));
}

CLI::Validator between(double min, double max) {
  char range[96];
  std::snprintf(range, sizeof range, "between %g and %g", min, max);
  const std::string rule = range;
  return CLI::Validator(
      [min, max, rule](std::string& text) -> std::string {
        char* end = nullptr;
        const double value = std::strtod(text.c_str(), &end);
        if (text.empty() || *end != '\0') return "must be a number (got '" + text + "')";
        if (!(value >= min && value <= max)) return "must be " + rule + " (got " + text + ")";
        return "";
      },
      rule);
}

CLI::Validator not_empty() {
  return CLI::Validator([](std::string& text) { return text.empty() ? std::string("must not be empty") : ""; },
                        "");
}

}  // namespace lab
