// Precision: the arithmetic a network's dense convolutions may use. Fp32 (the default) keeps every conv in
// float32; Tf32 lets dense convs (groups = 1, K = 1, 3, 5) multiply on TF32 tensor cores (conv2d v4_tf32:
// inputs rounded to 10 mantissa bits); Fp16 / Bf16 on fp16 / bf16 tensor cores (conv2d_mma v5_fp16 / v6_bf16:
// inputs and weights rounded to 11 / 8 significant bits). All three accumulate in float and keep float32
// activations between layers; depthwise convs, pooling, attention and the head's decode stay float32. A network
// picks each conv's precision from its own (pipeline/executor/precision_policy.hpp).
#pragma once
#include <optional>
#include <string>

namespace lab {

enum class Precision { Fp32, Tf32, Fp16, Bf16 };

std::string precision_name(Precision p);  // "fp32", "tf32", "fp16", "bf16"
// The precision named `name`; nullopt for any other name.
std::optional<Precision> parse_precision(const std::string& name);
inline constexpr const char* kPrecisionNames = "fp32, tf32, fp16, bf16";
inline constexpr Precision kPrecisions[] = {Precision::Fp32, Precision::Tf32, Precision::Fp16,
                                            Precision::Bf16};

}  // namespace lab
