// Host conversions between float and the 16-bit element types of the tensor-core kernels, through the host
// implementations of the CUDA headers (round to nearest even, as the kernels' own conversions).
#pragma once
#include <cstdint>
#include <vector>

#include "attention/flash_attn2_half_op.hpp"

namespace lab {

// Each value rounded to the nearest value of type `t` (ties to even), as its 16-bit pattern.
std::vector<uint16_t> to_half_bits(const std::vector<float>& values, HalfType t);
// The value of each 16-bit pattern, exact in float; NaN patterns (the 0xffff poison) stay NaN.
std::vector<float> half_bits_to_float(const std::vector<uint16_t>& bits, HalfType t);

}  // namespace lab
