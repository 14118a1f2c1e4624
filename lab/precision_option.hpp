// The --precision option of `lab detect` and `lab bench pipeline`: fp32 (default), tf32, fp16 or bf16.
#pragma once
#include <string>

#include "kernels/nn/precision.hpp"

namespace lab {

inline constexpr const char* kPrecisionHelp =
    "Arithmetic of the dense convs on a kernel backend: fp32 (default), tf32 (TF32 tensor cores), fp16 or "
    "bf16 "
    "(16-bit tensor cores); float accumulation in every case. Activations: float32 on the NCHW layout; on "
    "NHWC (--layout) 16-bit at fp16 / bf16 and float holding tf32 values at tf32";

// The precision named by `value`; UsageError "--precision fp8: unknown (fp32, tf32, fp16, bf16)" otherwise.
Precision precision_option(const std::string& value);

}  // namespace lab
