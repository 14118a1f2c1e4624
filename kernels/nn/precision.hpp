// Precision: the arithmetic a network's dense convolutions may use. Fp32 (the default) keeps every conv in
// float32; Tf32 lets dense convs (groups = 1, K = 1, 3, 5) multiply on TF32 tensor cores (conv2d v4_tf32:
// inputs rounded to 10 mantissa bits, float accumulation), trading ~2e-4 relative error per conv for speed.
#pragma once
#include <optional>
#include <string>

namespace lab {

enum class Precision { Fp32, Tf32 };

std::string precision_name(Precision p);  // "fp32", "tf32"
// The precision named `name` ("fp32", "tf32"); nullopt for any other name.
std::optional<Precision> parse_precision(const std::string& name);
inline constexpr const char* kPrecisionNames = "fp32, tf32";

}  // namespace lab
