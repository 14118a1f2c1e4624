// The 16-bit element types of the tensor-core kernels (fp16, bf16) on the host: their names on the command
// line and in scenarios, the template argument the kernels take (LAB_F16 / LAB_BF16 of common/lab_mma.cuh),
// and float <-> 16-bit conversions with the kernels' own rounding (nearest even).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace lab {

enum class HalfType { f16, bf16 };
HalfType parse_half_type(
    const std::string& name);  // "f16" / "bf16"; throws UsageError naming the valid values
// The kernels' DT template argument: "0" (LAB_F16) or "1" (LAB_BF16).
std::string half_type_template_arg(HalfType t);

// Half an ulp relative to the value: 2^-11 for fp16 (11-bit significand), 2^-8 for bf16 (8-bit).
double unit_roundoff(HalfType t);

// Each value rounded to the nearest value of type `t` (ties to even), as its 16-bit pattern.
std::vector<uint16_t> to_half_bits(const std::vector<float>& values, HalfType t);
// The value of each 16-bit pattern, exact in float; NaN patterns (the 0xffff poison) stay NaN.
std::vector<float> half_bits_to_float(const std::vector<uint16_t>& bits, HalfType t);

}  // namespace lab
