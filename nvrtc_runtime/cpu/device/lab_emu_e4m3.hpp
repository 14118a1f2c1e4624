// The e4m3 format (OCP FP8 E4M3 "fn": sign, 4 exponent bits of bias 7, 3 mantissa bits; no infinities, NaN
// is S.1111.111, largest finite 448, smallest subnormal 2^-9) and the conversions the H200 performs:
// cvt.rn.satfinite.e4m3x2.f32 (round to nearest even; finite values beyond 448 and infinities saturate to
// +-448; NaN becomes 0x7f) and its exact inverse. Self-contained (no emulator state): the emulator's
// lab_e4m3x2 / lab_e4m3_to_float and host code quantising inputs share it.
#pragma once

#include <cmath>
#include <cstdint>

namespace lab_emu {

inline float e4m3_to_float(uint8_t bits) {
  const int exponent = bits >> 3 & 15, mantissa = bits & 7;
  const float sign = bits & 0x80 ? -1.0f : 1.0f;
  if (exponent == 15 && mantissa == 7) return std::nanf("");
  if (exponent == 0) return sign * std::ldexp(float(mantissa), -9);
  return sign * std::ldexp(float(8 + mantissa), exponent - 10);
}

inline uint8_t e4m3_from_float(float x) {
  if (std::isnan(x)) return 0x7f;
  const uint8_t sign = std::signbit(x) ? 0x80 : 0;
  const float a = std::fabs(x);
  if (a >= 448.0f) return sign | 0x7e;
  if (a < 0x1p-6f)  // subnormal: multiples of 2^-9 (8 of them make the smallest normal, code 0x08)
    return sign | uint8_t(std::nearbyint(a * 0x1p9f));
  int e;
  const float m = std::frexp(a, &e);  // a = m 2^e, m in [0.5, 1): the exponent field is e + 6
  const int q = int(std::nearbyint((m * 2 - 1) * 8));  // 0..8 (8: the next binade, still the right code)
  return sign | uint8_t(((e + 6) << 3) + q);
}

}  // namespace lab_emu
