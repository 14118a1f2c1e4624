// The --precision option of `lab detect` and `lab bench pipeline`: fp32 (default), tf32, fp16 or bf16.
#pragma once
#include <string>

#include "kernels/nn/precision.hpp"

namespace lab {

inline constexpr const char* kPrecisionHelp =
    "Arithmetic of the dense convs on a kernel backend: fp32 (default), tf32 (TF32 tensor cores, conv2d "
    "v4_tf32), fp16 or bf16 (16-bit tensor cores, conv2d v5_fp16 / v6_bf16); float accumulation and float32 "
    "activations in every case";

// The precision named by `value`; UsageError "--precision fp8: unknown (fp32, tf32, fp16, bf16)" otherwise.
Precision precision_option(const std::string& value);

}  // namespace lab
