// What the runners of the NHWC kernels (conv2d_nhwc, conv2d_stem_nhwc, nhwc_layers; 16-bit or float elements)
// share: planar [B][C][plane] host values laid out as pixels with a pitch, float values rounded to an element
// type, the check of an output written into a channel slice of a wider poisoned buffer, and the convolutions'
// sizes. Device buffers are raw bytes of the element type; the poison is every byte 0xff (NaN in each type).
#pragma once
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "kernels/common/activation_type.hpp"
#include "kernels/compare.hpp"
#include "kernels/kernel_spec.hpp"
#include "kernels/nn/conv2d_shape.hpp"

namespace lab {

// [batch][c][plane] values stored as `type` -> the bytes of [batch * plane][pitch] with channel ch at offset
// + ch; every other element of the pitch poisoned.
std::vector<unsigned char> to_nhwc(const std::vector<float>& nchw, ActivationType type, int batch, int c,
                                   int64_t plane, int pitch, int offset = 0);
// [batch][c][plane] values -> [batch * plane][c] (dense pixels).
std::vector<double> nchw_to_pixels(const std::vector<double>& nchw, int batch, int c, int64_t plane);

// Each value rounded to the element type (fp16 / bf16 nearest even, tf32 nearest tf32, f32 unchanged), as a
// float.
std::vector<float> rounded_to(const std::vector<float>& values, ActivationType type);

// The bound of an output rounded once to the element type: rel_l2 one unit in the last place (2^-10 fp16 and
// tf32, 2^-7 bf16: twice the half unit the rounding can cost), max_abs one unit at the largest |ref| (at
// least 1); f32 (not rounded): 2^-17, the 3xTF32 products' error (nhwc_runner_support.cpp says why).
Tolerance one_unit_tolerance(ActivationType type, const std::vector<double>& ref);

// The checks of an output slice: `all` is the downloaded [pixels][pitch] buffer's bytes (poisoned before the
// launch), the slice its channels [offset, offset + shape.back()), shape = {dims.., channels} with pixels
// the product of the dims. "out": the slice against `ref` ([pixels][channels]) under `tol`;
// "out_neighbours": every element outside the slice still poisoned, exactly.
std::vector<OutputCheck> check_nhwc_slice(const std::vector<unsigned char>& all,
                                          const std::vector<size_t>& shape, int pitch, int offset,
                                          ActivationType type, const std::vector<double>& ref,
                                          const Tolerance& tol);

// The output slice's parameters of the NHWC convolution runners: OUT_OFFSET and OUT_PITCH (0: OUT_OFFSET +
// C_OUT); and their rule, which throws UsageError ("parameter OUT_PITCH=.. of <runner> is invalid: below
// OUT_OFFSET + C_OUT") when OUT_PITCH is given and cannot hold the slice.
std::vector<ParamSpec> nhwc_out_slice_params();
void check_out_slice_params(const Params& p, const std::string& runner);

// The DTYPE parameter of the NHWC runners: f16, bf16 or f32 (float activations, tf32 products).
ParamSpec nhwc_dtype_param();

// The sizes the NHWC convolution runners (conv2d_nhwc, conv2d_stem_nhwc) read from their common parameters
// B, H, W, DTYPE, OUT_OFFSET and OUT_PITCH (0: OUT_OFFSET + C_OUT), and the check of their output.
struct NhwcConvRun {
  ActivationType type;
  int batch, h, w, ho, wo, c_out, out_offset, out_pitch;
  size_t out_pixels() const { return size_t(batch) * size_t(ho) * size_t(wo); }
  // Bytes of the whole output buffer (out_pixels x out_pitch elements).
  size_t out_bytes() const { return out_pixels() * size_t(out_pitch) * size_t(activation_bytes(type)); }
  // `all`: the downloaded output buffer; ref_nchw: conv2d_reference's [batch][c_out][ho][wo].
  // check_nhwc_slice under `tol`, else one_unit_tolerance: products summed in float32 are off by ~1e-6 for
  // these O(1) terms, the output's rounding to the element type by at most half a unit in the last place; a
  // dropped tap or channel block (>= 1 / 9 of a 3x3 sum) is off by far more.
  std::vector<OutputCheck> check(const std::vector<unsigned char>& all, const std::vector<double>& ref_nchw,
                                 const std::optional<Tolerance>& tol) const;
};
NhwcConvRun nhwc_conv_run(const Params& p, const Conv2dShape& s);

}  // namespace lab
