// Host NHWC layouts, rounding, the slice check and the convolutions' sizes of the NHWC runners
// (nhwc_runner_support.hpp).
#include "kernels/nn/nhwc_runner_support.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "nvrtc_runtime/errors.hpp"

namespace lab {

std::vector<unsigned char> to_nhwc(const std::vector<float>& nchw, ActivationType type, int batch, int c,
                                   int64_t plane, int pitch, int offset) {
  const std::vector<unsigned char> elements = to_activation_bytes(nchw, type);
  const size_t bytes = size_t(activation_bytes(type));
  std::vector<unsigned char> out(size_t(batch) * size_t(plane) * size_t(pitch) * bytes, 0xff);
  for (int b = 0; b < batch; ++b)
    for (int ch = 0; ch < c; ++ch)
      for (int64_t i = 0; i < plane; ++i)
        std::memcpy(&out[((size_t(b) * plane + size_t(i)) * pitch + offset + ch) * bytes],
                    &elements[((size_t(b) * c + ch) * plane + size_t(i)) * bytes], bytes);
  return out;
}

std::vector<double> nchw_to_pixels(const std::vector<double>& nchw, int batch, int c, int64_t plane) {
  std::vector<double> out(nchw.size());
  for (int b = 0; b < batch; ++b)
    for (int ch = 0; ch < c; ++ch)
      for (int64_t i = 0; i < plane; ++i)
        out[(size_t(b) * plane + size_t(i)) * c + ch] = nchw[(size_t(b) * c + ch) * plane + size_t(i)];
  return out;
}

std::vector<float> rounded_to(const std::vector<float>& values, ActivationType type) {
  return activation_bytes_to_float(to_activation_bytes(values, type), type);
}

Tolerance one_unit_tolerance(ActivationType type, const std::vector<double>& ref) {
  double largest = 1.0;
  for (double v : ref) largest = std::max(largest, std::abs(v));
  // f32 outputs are not rounded: they are float32 sums of 3xTF32 products (each within about 2^-20 of the
  // exact product: the lo x lo term and the lo parts' own tf32 truncation dropped), at most 9 x 1024 terms in
  // these runners; 2^-17 (7.6e-6) relative bounds them, and a dropped tap or channel block stays far above.
  const double unit = type == ActivationType::f32 ? 0x1p-17 : 2 * unit_roundoff(type);
  return {unit, unit * largest};
}

ParamSpec nhwc_dtype_param() {
  return {"DTYPE",
          ParamSpec::Kind::Choice,
          "f16",
          "element type (tf32: float activations holding tf32 values, tf32 products; f32: float activations, "
          "3xTF32 products)",
          0,
          0,
          false,
          {"f16", "bf16", "tf32", "f32"}};
}

std::vector<OutputCheck> check_nhwc_slice(const std::vector<unsigned char>& all,
                                          const std::vector<size_t>& shape, int pitch, int offset,
                                          ActivationType type, const std::vector<double>& ref,
                                          const Tolerance& tol) {
  const int channels = int(shape.back());
  const size_t bytes = size_t(activation_bytes(type)), pixels = all.size() / bytes / size_t(pitch);
  std::vector<unsigned char> window;
  std::vector<float> changed;  // 1 where an element outside the slice lost its poison
  window.reserve(pixels * size_t(channels) * bytes);
  for (size_t px = 0; px < pixels; ++px)
    for (int ch = 0; ch < pitch; ++ch) {
      const unsigned char* element = &all[(px * size_t(pitch) + size_t(ch)) * bytes];
      if (ch >= offset && ch < offset + channels)
        window.insert(window.end(), element, element + bytes);
      else
        changed.push_back(
            std::all_of(element, element + bytes, [](unsigned char b) { return b == 0xff; }) ? 0.0f : 1.0f);
    }
  return {make_check("out", shape, activation_bytes_to_float(window, type), ref, tol),
          make_check("out_neighbours", {changed.size()}, changed, std::vector<double>(changed.size(), 0.0),
                     Tolerance{0, 0}, false)};
}

std::vector<ParamSpec> nhwc_out_slice_params() {
  using K = ParamSpec::Kind;
  return {{"OUT_OFFSET", K::Int, "0", "first channel of the output slice", 0, 2048, false, {}, 8},
          {"OUT_PITCH",
           K::Int,
           "0",
           "channels per output pixel in memory (0: OUT_OFFSET + C_OUT)",
           0,
           4096,
           false,
           {},
           8}};
}

void check_out_slice_params(const Params& p, const std::string& runner) {
  if (param_int(p, "OUT_PITCH") &&
      param_int(p, "OUT_PITCH") < param_int(p, "OUT_OFFSET") + param_int(p, "C_OUT"))
    throw UsageError("parameter OUT_PITCH=" + p.at("OUT_PITCH") + " of " + runner +
                     " is invalid: below OUT_OFFSET + C_OUT");
}

NhwcConvRun nhwc_conv_run(const Params& p, const Conv2dShape& s) {
  const int h = int(param_int(p, "H")), w = int(param_int(p, "W")), offset = int(param_int(p, "OUT_OFFSET"));
  return {parse_activation_type(param_str(p, "DTYPE")),
          int(param_int(p, "B")),
          h,
          w,
          s.out_size(h),
          s.out_size(w),
          s.c_out,
          offset,
          param_int(p, "OUT_PITCH") ? int(param_int(p, "OUT_PITCH")) : offset + s.c_out};
}

std::vector<OutputCheck> NhwcConvRun::check(const std::vector<unsigned char>& all,
                                            const std::vector<double>& ref_nchw,
                                            const std::optional<Tolerance>& tol) const {
  const std::vector<double> ref = nchw_to_pixels(ref_nchw, batch, c_out, int64_t(ho) * wo);
  return check_nhwc_slice(all, {size_t(batch), size_t(ho), size_t(wo), size_t(c_out)}, out_pitch, out_offset,
                          type, ref, tol.value_or(one_unit_tolerance(type, ref)));
}

}  // namespace lab
