// The --precision option of `lab detect` and `lab bench pipeline`: fp32 (default) or tf32.
#pragma once
#include <string>

#include "kernels/nn/precision.hpp"

namespace lab {

inline constexpr const char* kPrecisionHelp =
    "Arithmetic of the dense convs on a kernel backend: fp32 (default) or tf32 (TF32 tensor cores, "
    "conv2d v4_tf32)";

// The precision named by `value`; UsageError "--precision fp16: not supported yet (fp32, tf32)" otherwise.
Precision precision_option(const std::string& value);

}  // namespace lab
