// "NAME=VALUE" parsing.
#include "harness/param_args.hpp"

#include "nvrtc_runtime/errors.hpp"

namespace lab {

Params parse_param_args(const std::vector<std::string>& args) {
  Params params;
  for (const std::string& arg : args) {
    const size_t eq = arg.find('=');
    if (eq == std::string::npos || eq == 0) throw UsageError("--param expects NAME=VALUE, got '" + arg + "'");
    params[arg.substr(0, eq)] = arg.substr(eq + 1);
  }
  return params;
}

}  // namespace lab
