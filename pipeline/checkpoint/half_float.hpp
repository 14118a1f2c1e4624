// IEEE half (F16) and bfloat16 (BF16) <-> float conversions. Narrowing rounds to nearest even and keeps
// infinities and NaN payload bits, so half -> float -> half and bf16 -> float -> bf16 are bit-exact.
#pragma once
#include <bit>
#include <cstdint>

namespace lab {

inline float half_bits_to_float(uint16_t h) {
  const uint32_t sign = uint32_t{h & 0x8000u} << 16;
  const uint32_t exponent = (h >> 10) & 0x1fu;
  const uint32_t mantissa = h & 0x3ffu;
  if (exponent == 0x1f) return std::bit_cast<float>(sign | 0x7f800000u | (mantissa << 13));
  if (exponent != 0) return std::bit_cast<float>(sign | ((exponent + 112) << 23) | (mantissa << 13));
  const float magnitude = static_cast<float>(mantissa) * 0x1p-24f;  // zero or subnormal
  return sign ? -magnitude : magnitude;
}

inline uint16_t float_to_half_bits(float value) {
  const uint32_t bits = std::bit_cast<uint32_t>(value);
  const uint16_t sign = static_cast<uint16_t>((bits >> 16) & 0x8000u);
  const uint32_t exponent = (bits >> 23) & 0xffu;
  uint32_t mantissa = bits & 0x7fffffu;
  if (exponent == 0xff) {  // infinity or NaN (keep the top payload bits, force a quiet bit for NaN)
    const uint32_t payload = mantissa >> 13;
    return static_cast<uint16_t>(sign | 0x7c00u | (mantissa ? (payload ? payload : 0x200u) : 0u));
  }
  const int half_exponent = static_cast<int>(exponent) - 127 + 15;
  if (half_exponent >= 0x1f) return static_cast<uint16_t>(sign | 0x7c00u);  // overflow -> infinity
  if (half_exponent <= 0) {                                                 // subnormal half or zero
    if (half_exponent < -10) return sign;
    mantissa |= 0x800000u;
    const int shift = 14 - half_exponent;
    const uint32_t half_mantissa = mantissa >> shift;
    const uint32_t remainder = mantissa & ((1u << shift) - 1);
    const uint32_t halfway = 1u << (shift - 1);
    const uint32_t rounded =
        half_mantissa + ((remainder > halfway || (remainder == halfway && (half_mantissa & 1))) ? 1 : 0);
    return static_cast<uint16_t>(sign | rounded);
  }
  const uint32_t remainder = mantissa & 0x1fffu;
  uint32_t result = (static_cast<uint32_t>(half_exponent) << 10) | (mantissa >> 13);
  if (remainder > 0x1000u || (remainder == 0x1000u && (result & 1))) ++result;  // may carry into infinity
  return static_cast<uint16_t>(sign | result);
}

inline float bf16_bits_to_float(uint16_t b) {
  return std::bit_cast<float>(uint32_t{b} << 16);
}

inline uint16_t float_to_bf16_bits(float value) {
  const uint32_t bits = std::bit_cast<uint32_t>(value);
  if ((bits & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((bits >> 16) | 0x40u);  // quiet NaN
  const uint32_t rounding = 0x7fffu + ((bits >> 16) & 1u);
  return static_cast<uint16_t>((bits + rounding) >> 16);
}

}  // namespace lab
