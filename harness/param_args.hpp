// Kernel parameters given as "NAME=VALUE" text (`lab run --param`, the viewer's child run).
#pragma once
#include <string>
#include <vector>

#include "kernels/runner.hpp"

namespace lab {

// "k=v" arguments of --param into Params; throws UsageError for text without '='.
Params parse_param_args(const std::vector<std::string>& args);

}  // namespace lab
