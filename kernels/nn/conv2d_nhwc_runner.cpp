// conv2d_nhwc's spec and runner: a seeded NHWC fp16 / bf16 input whose pitch may exceed its channels (the
// channels past C_IN hold NaN poison: the kernel must never read them), seeded weights and bias (rounded to
// the element type, as Conv2dNhwcOp would), an optional residual, and an output written into the channel
// slice [OUT_OFFSET, OUT_OFFSET + C_OUT) of a wider poisoned buffer. Checked against conv2d_reference
// (float64, NCHW) of the rounded values; the channels around the slice must keep their poison.
#include <algorithm>
#include <cmath>

#include "kernels/common/half_type.hpp"
#include "kernels/nn/conv2d_inputs.hpp"
#include "kernels/nn/conv2d_nhwc_op.hpp"
#include "kernels/nn/conv2d_reference.hpp"
#include "kernels/nn/nhwc_runner_support.hpp"
#include "kernels/runner.hpp"
#include "nvrtc_runtime/errors.hpp"

namespace lab {
namespace {

Conv2dShape nhwc_shape(const Params& p) {
  Conv2dShape s;
  s.c_in = int(param_int(p, "C_IN"));
  s.c_out = int(param_int(p, "C_OUT"));
  s.kernel = int(param_int(p, "K"));
  s.stride = int(param_int(p, "STRIDE"));
  s.silu = param_bool(p, "SILU");
  return s;
}

// The pitch a parameter asks for, or (0) the smallest.
int pitch_param(const Params& p, const std::string& name, int least) {
  const int given = int(param_int(p, name));
  return given ? given : nhwc_min_pitch(least);
}

const KernelSpec& conv2d_nhwc_spec() {
  using K = ParamSpec::Kind;
  static const KernelSpec spec{
      .name = "conv2d_nhwc",
      .family = "nn",
      .description =
          "Conv2d 1x1 / 3x3 (+bias, SiLU, residual) on NHWC fp16/bf16: wgmma + TMA implicit GEMM "
          "(sm_90a), output into a channel slice",
      .source = "nn/conv2d_nhwc.cu",
      .variants = {{"wgmma",
                    "TMA (im2col for 3x3, tiled for 1x1) into a 4-stage mbarrier ring, one or two wgmma "
                    "consumer warpgroups, fused epilogue"}},
      .params =
          {{"B", K::Int, "1", "batch", 1, 256},
           {"C_IN", K::Int, "32", "input channels", 1, 1024},
           {"C_OUT", K::Int, "64", "output channels (a multiple of 8)", 8, 1024, false, {}, 8},
           {"H", K::Int, "16", "input height", 1, 2048},
           {"W", K::Int, "16", "input width", 1, 2048},
           {"K", K::Int, "3", "kernel size (padding K / 2)", 1, 3, false, {"1", "3"}},
           {"STRIDE", K::Int, "1", "stride (1x1: 1)", 1, 2},
           {"SILU", K::Bool, "true", "SiLU after the bias"},
           {"RESIDUAL", K::Bool, "false", "add a residual of the output's shape"},
           {"DTYPE", K::Choice, "f16", "16-bit element type", 0, 0, false, {"f16", "bf16"}},
           {"IN_PITCH",
            K::Int,
            "0",
            "channels per input pixel in memory (0: C_IN rounded up to 8)",
            0,
            2048,
            false,
            {},
            8},
           {"OUT_OFFSET", K::Int, "0", "first channel of the output slice", 0, 2048, false, {}, 8},
           {"OUT_PITCH",
            K::Int,
            "0",
            "channels per output pixel in memory (0: OUT_OFFSET + C_OUT)",
            0,
            4096,
            false,
            {},
            8},
           {"BLOCK_M",
            K::Choice,
            "auto",
            "output pixels per CTA: 128 (two consumer warpgroups) or 64 (one); auto: 64 when 128 leaves "
            "SMs idle",
            0,
            0,
            false,
            {"auto", "64", "128"}}},
      .validate =
          [](const Params& p) {
            if (const std::string problem = conv2d_nhwc_problem(nhwc_shape(p)); !problem.empty())
              throw UsageError(problem);
            if (param_int(p, "IN_PITCH") && param_int(p, "IN_PITCH") < param_int(p, "C_IN"))
              throw UsageError("parameter IN_PITCH=" + p.at("IN_PITCH") +
                               " of conv2d_nhwc is invalid: below C_IN=" + p.at("C_IN"));
            if (param_int(p, "OUT_PITCH") &&
                param_int(p, "OUT_PITCH") < param_int(p, "OUT_OFFSET") + param_int(p, "C_OUT"))
              throw UsageError("parameter OUT_PITCH=" + p.at("OUT_PITCH") +
                               " of conv2d_nhwc is invalid: below OUT_OFFSET + C_OUT");
          },
      .compile =
          [](const std::string&, const Params& p) {
            return conv2d_nhwc_compile_request(parse_half_type(param_str(p, "DTYPE")), nhwc_shape(p));
          },
      .arch_specific = true};
  return spec;
}

class Conv2dNhwcInstance : public InstanceBase {
 public:
  Conv2dNhwcInstance(Backend& backend, const std::string&, const Params& p, uint64_t seed)
      : InstanceBase(backend),
        shape_(nhwc_shape(p)),
        type_(parse_half_type(param_str(p, "DTYPE"))),
        batch_(int(param_int(p, "B"))),
        h_(int(param_int(p, "H"))),
        w_(int(param_int(p, "W"))),
        ho_(shape_.out_size(h_)),
        wo_(shape_.out_size(w_)),
        in_pitch_(pitch_param(p, "IN_PITCH", shape_.c_in)),
        out_offset_(int(param_int(p, "OUT_OFFSET"))),
        out_pitch_(pitch_param(p, "OUT_PITCH", out_offset_ + shape_.c_out)),
        block_m_(param_str(p, "BLOCK_M") == "auto" ? 0 : int(param_int(p, "BLOCK_M"))) {
    Conv2dInputs inputs = conv2d_random_inputs(shape_, batch_, h_, w_, seed);
    in_nchw_ = rounded_to(inputs.in, type_);
    weight_ = rounded_to(inputs.weight, type_);
    bias_ = std::move(inputs.bias);
    in_ = backend.upload_vector(
        to_nhwc(to_half_bits(in_nchw_, type_), batch_, shape_.c_in, int64_t(h_) * w_, in_pitch_, 0xffff));
    if (param_bool(p, "RESIDUAL")) {
      residual_nchw_ = rounded_to(
          random_uniform(out_pixels() * shape_.c_out, -1.0f, 1.0f, derive_seed(seed, "residual")), type_);
      residual_ = backend.upload_vector(to_nhwc(to_half_bits(residual_nchw_, type_), batch_, shape_.c_out,
                                                int64_t(ho_) * wo_, shape_.c_out, 0xffff));
    }
    out_ = output_array<uint16_t>(out_pixels() * size_t(out_pitch_));
    op_.emplace(backend, shape_, type_, weight_, bias_);
  }

  void launch() override {
    op_->run(batch_, h_, w_, {in_.as<uint16_t>(), in_pitch_}, {out_.as<uint16_t>() + out_offset_, out_pitch_},
             residual_nchw_.empty() ? NhwcView{} : NhwcView{residual_.as<uint16_t>(), shape_.c_out},
             block_m_);
  }

  std::vector<OutputCheck> check(const std::optional<Tolerance>& tol) override {
    const std::vector<uint16_t> all = fetch<uint16_t>(out_, out_pixels() * size_t(out_pitch_));
    const std::vector<double> ref_nchw =
        conv2d_reference(shape_, batch_, h_, w_, in_nchw_, weight_, bias_, residual_nchw_);
    const size_t c_out = size_t(shape_.c_out);
    const std::vector<double> ref = nchw_to_pixels(ref_nchw, batch_, shape_.c_out, int64_t(ho_) * wo_);
    // Products of 16-bit values are exact in float and the float32 sums of these O(1) terms are off by ~1e-6;
    // what remains is the output's rounding to the element type, at most half a unit in the last place:
    // 2^-11 (fp16) or 2^-8 (bf16) relative, rms ~ a third of that. max_abs: one unit at the largest
    // magnitude, rel_l2: twice the half unit. A dropped tap or channel block (>= 1 / 9 of a 3x3 sum) is off
    // by far more.
    return check_nhwc_slice(all, {size_t(batch_), size_t(ho_), size_t(wo_), c_out}, out_pitch_, out_offset_,
                            type_, ref, tol.value_or(one_unit_tolerance(type_, ref)));
  }

  WorkCounts work() const override {
    const double outputs = double(out_pixels()) * shape_.c_out;
    const double bytes = 2.0 * (double(batch_) * h_ * w_ * shape_.c_in + double(shape_.weight_count()) +
                                outputs * (residual_nchw_.empty() ? 1 : 2)) +
                         4.0 * shape_.c_out;
    return {bytes, 2.0 * outputs * shape_.c_in * shape_.kernel * shape_.kernel};
  }

 private:
  size_t out_pixels() const { return size_t(batch_) * size_t(ho_) * size_t(wo_); }

  Conv2dShape shape_;
  HalfType type_;
  int batch_, h_, w_, ho_, wo_, in_pitch_, out_offset_, out_pitch_, block_m_;
  std::vector<float> in_nchw_, weight_, bias_, residual_nchw_;
  DeviceBuffer in_, residual_, out_;
  std::optional<Conv2dNhwcOp> op_;
};

const bool registered = register_runner(conv2d_nhwc_spec(), make_instance<Conv2dNhwcInstance>());

}  // namespace
}  // namespace lab
