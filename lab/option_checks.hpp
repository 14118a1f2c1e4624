// Checks of option values that read in words: integer ranges ("--iters: must be at least 1 (got 0)" instead
// of CLI11's "not in range 2.22507e-308 to 1.79769e+308"; text that is not a whole number is refused too) and
// paths that must not be empty (`--model ''` is an error, not the default).
#pragma once
#include <CLI/CLI.hpp>

namespace lab {

CLI::Validator at_least(long long min);
CLI::Validator in_range(long long min, long long max);
CLI::Validator between(double min, double max);  // a real number in [min, max]
CLI::Validator not_empty();

}  // namespace lab
