// 2^x on the FMA and integer pipes, for the attention softmax's share of exponentials that skip the MUFU unit
// (ex2.approx does 16 a clock an SM; FFMA / FADD / IMAD 128). The inputs are the softmax's x = s - m <= 0,
// down to a masked key's -1.4e30 and -inf.
//
// Method: x = n + f with n = rint(x) by the round-to-nearest shifter (1.5 * 2^23: adding it leaves n in the
// low mantissa bits of the sum, subtracting it again gives n as a float), |f| <= 1/2; 2^f by a polynomial in
// f (Horner, FFMA); 2^n by adding n into the result's exponent bits (one shift-add; the shifter's own bits
// shift out above bit 31). x is clamped at -126 first (-inf would make f NaN): below it the result is
// ~2^-126 where ex2.approx.ftz gives 0, an absolute error under 2^-126 beside the row's largest P, 1.
//
// Degree, from the error the attention outputs can absorb. A relative error e of a polynomial of degree d on
// [-1/2, 1/2] (minimax, near Chebyshev interpolation's (ln 2 / 2)^(d+1) / ((d+1)! 2^(d-1))): d 3 8e-5,
// d 4 2.7e-6, d 5 8e-8.
//  - O: P is rounded to the element type before P V, a relative error of up to 2^-11 (fp16), 2^-8 (bf16),
//    2^-4 (e4m3): any e under a tenth of 2^-11 is invisible there; degree 3 would do.
//  - L = m + ln(sum of P) over the unrounded float32 P: a relative error e in every term moves L by up to e
//    (ln(1 + e)). The 16-bit forwards check L at 1e-5 relative (rel_l2) and 1e-4 absolute, with L of order
//    ln n_k (1 to 10 at the tests' sizes), so e must stay under 1e-5 with room for float32's own rounding of
//    the sum: degree 3's 8e-5 fails, degree 4 passes 4x under, degree 5 costs an FFMA more for nothing.
// Degree 4, coefficients fitted on Chebyshev nodes: measured in float32 (FFMA Horner), the largest relative
// error over [-126, 0] is 2.73e-6 (tests/test_exp2_fma.cpp asserts 3e-6 on every backend).
// Cost: FMNMX, 3 FADD, 4 FFMA, 1 IMAD/LEA — 9 instructions on pipes with 8x the MUFU's rate.
#pragma once

__device__ __forceinline__ float exp2_fma(float x) {
  constexpr float kShifter = 12582912.f;  // 1.5 * 2^23
  x = fmaxf(x, -126.f);
  const float shifted = x + kShifter;
  const float f = x - (shifted - kShifter);
  float p = fmaf(0.009560510516166687f, f, 0.05591703951358795f);
  p = fmaf(p, f, 0.24024981260299683f);
  p = fmaf(p, f, 0.6931219696998596f);
  p = fmaf(p, f, 0.9999991655349731f);
  return __int_as_float(__float_as_int(p) + (__float_as_int(shifted) << 23));
}
