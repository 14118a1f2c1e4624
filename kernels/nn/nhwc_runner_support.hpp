// What the runners of the NHWC 16-bit kernels (conv2d_nhwc, nhwc_layers) share: planar [B][C][plane] host
// values laid out as pixels with a pitch, float values rounded to an element type, and the check of an
// output written into a channel slice of a wider poisoned buffer.
#pragma once
#include <cstdint>
#include <vector>

#include "kernels/common/half_type.hpp"
#include "kernels/compare.hpp"

namespace lab {

// [batch][c][plane] patterns -> [batch * plane][pitch] with channel ch at offset + ch; every other element
// of the pitch holds `fill`.
std::vector<uint16_t> to_nhwc(const std::vector<uint16_t>& nchw, int batch, int c, int64_t plane, int pitch,
                              uint16_t fill, int offset = 0);
// [batch][c][plane] values -> [batch * plane][c] (dense pixels).
std::vector<double> nchw_to_pixels(const std::vector<double>& nchw, int batch, int c, int64_t plane);

// Each value rounded to the element type (nearest even), as a float.
std::vector<float> rounded_to(const std::vector<float>& values, HalfType type);

// The bound of an output rounded once to the element type: rel_l2 one unit in the last place (2^-10 fp16,
// 2^-7 bf16: twice the half unit the rounding can cost), max_abs one unit at the largest |ref| (at least 1).
Tolerance one_unit_tolerance(HalfType type, const std::vector<double>& ref);

// The checks of an output slice: `all` is the downloaded [pixels][pitch] buffer (poisoned, 0xffff, before the
// launch), the slice its channels [offset, offset + shape.back()), shape = {dims.., channels} with pixels
// the product of the dims. "out": the slice against `ref` ([pixels][channels]) under `tol`;
// "out_neighbours": every element outside the slice still poisoned, exactly.
std::vector<OutputCheck> check_nhwc_slice(const std::vector<uint16_t>& all, const std::vector<size_t>& shape,
                                          int pitch, int offset, HalfType type,
                                          const std::vector<double>& ref, const Tolerance& tol);

}  // namespace lab
