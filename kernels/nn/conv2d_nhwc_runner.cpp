// conv2d_nhwc's spec and runner: a seeded NHWC fp16 / bf16 / float input whose pitch may exceed its channels
// (the channels past C_IN hold NaN poison: the kernel must never read them), seeded weights and bias (rounded
// to the element type, as Conv2dNhwcOp would: f32 holds tf32 values), an optional residual, and an output
// written into the channel slice [OUT_OFFSET, OUT_OFFSET + C_OUT) of a wider poisoned buffer; SPLIT_K > 1
// runs the split-K mode with its own workspace. Checked against conv2d_reference (float64, NCHW) of the
// rounded values; the channels around the slice must keep their poison.
#include "kernels/common/activation_type.hpp"
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

// The parameters: the shape, the input's pitch, the output slice (nhwc_out_slice_params), the pixel and
// channel tiles, the split.
std::vector<ParamSpec> conv2d_nhwc_params() {
  using K = ParamSpec::Kind;
  std::vector<ParamSpec> params{
      {"B", K::Int, "1", "batch", 1, 256},
      {"C_IN", K::Int, "32", "input channels", 1, 1024},
      {"C_OUT", K::Int, "64", "output channels (a multiple of 8)", 8, 1024, false, {}, 8},
      {"H", K::Int, "16", "input height", 1, 2048},
      {"W", K::Int, "16", "input width", 1, 2048},
      {"K", K::Int, "3", "kernel size (padding K / 2)", 1, 3, false, {"1", "3"}},
      {"STRIDE", K::Int, "1", "stride (1x1: 1)", 1, 2},
      {"SILU", K::Bool, "true", "SiLU after the bias"},
      {"RESIDUAL", K::Bool, "false", "add a residual of the output's shape"},
      nhwc_dtype_param(),
      {"IN_PITCH",
       K::Int,
       "0",
       "channels per input pixel in memory (0: C_IN rounded up to 8)",
       0,
       2048,
       false,
       {},
       8}};
  for (const ParamSpec& slice : nhwc_out_slice_params()) params.push_back(slice);
  params.push_back(
      {"BLOCK_M",
       K::Choice,
       "auto",
       "output pixels per CTA: 128 (two consumer warpgroups) or 64 (one); auto: 64 when 128 leaves "
       "SMs idle",
       0,
       0,
       false,
       {"auto", "64", "128"}});
  params.push_back(
      {"BLOCK_N",
       K::Choice,
       "auto",
       "output channels per CTA; auto: the smallest of 16, 32, 64, 128 covering C_OUT (128 above), 64 "
       "where 128 leaves SMs idle",
       0,
       0,
       false,
       {"auto", "16", "32", "64", "128"}});
  params.push_back({"SPLIT_K", K::Int, "1",
                    "CTAs sharing each output tile's reduction (split-K at BLOCK_M 64; 1: none); 0: the "
                    "network's rule (kConv2dNhwcSplitRule: double while the tiles still fit the SMs)",
                    0, 64});
  return params;
}

// BLOCK_N as the op takes it (0: auto).
int block_n_param(const Params& p) {
  return param_str(p, "BLOCK_N") == "auto" ? 0 : int(param_int(p, "BLOCK_N"));
}

// SPLIT_K as given (0: the rule's choice for this run's size on the op's device).
int split_param(const Params& p, const Conv2dNhwcOp& op, const NhwcConvRun& io) {
  const int given = int(param_int(p, "SPLIT_K"));
  return given ? given : op.split_k(io.batch, io.h, io.w, kConv2dNhwcSplitRule.max_splits);
}

const KernelSpec& conv2d_nhwc_spec() {
  static const KernelSpec spec{
      .name = "conv2d_nhwc",
      .family = "nn",
      .description =
          "Conv2d 1x1 / 3x3 (+bias, SiLU, residual) on NHWC fp16/bf16/f32 (tf32): wgmma + TMA implicit GEMM "
          "(sm_90a), output into a channel slice",
      .source = "nn/conv2d_nhwc.cu",
      .variants = {{"wgmma",
                    "TMA (im2col for 3x3, tiled for 1x1) into a 4-stage mbarrier ring, one or two wgmma "
                    "consumer warpgroups, fused epilogue"}},
      .params = conv2d_nhwc_params(),
      .validate =
          [](const Params& p) {
            if (const std::string problem = conv2d_nhwc_problem(nhwc_shape(p)); !problem.empty())
              throw UsageError(problem);
            if (param_int(p, "IN_PITCH") && param_int(p, "IN_PITCH") < param_int(p, "C_IN"))
              throw UsageError("parameter IN_PITCH=" + p.at("IN_PITCH") +
                               " of conv2d_nhwc is invalid: below C_IN=" + p.at("C_IN"));
            check_out_slice_params(p, "conv2d_nhwc");
            const int steps = conv2d_nhwc_steps(parse_activation_type(param_str(p, "DTYPE")), nhwc_shape(p));
            if (param_int(p, "SPLIT_K") > steps)
              throw UsageError("parameter SPLIT_K=" + p.at("SPLIT_K") +
                               " of conv2d_nhwc is invalid: above the " + std::to_string(steps) +
                               " reduction steps of this shape (K*K x ceil(C_IN / BK))");
            if (param_int(p, "SPLIT_K") != 1 && param_str(p, "BLOCK_M") == "128")
              throw UsageError("parameter SPLIT_K=" + p.at("SPLIT_K") +
                               " of conv2d_nhwc is invalid with BLOCK_M=128: split-K runs at BLOCK_M 64");
          },
      .compile =
          [](const std::string&, const Params& p) {
            return conv2d_nhwc_compile_request(parse_activation_type(param_str(p, "DTYPE")), nhwc_shape(p),
                                               block_n_param(p));
          },
      .arch_specific = true};
  return spec;
}

class Conv2dNhwcInstance : public InstanceBase {
 public:
  Conv2dNhwcInstance(Backend& backend, const std::string&, const Params& p, uint64_t seed)
      : InstanceBase(backend),
        shape_(nhwc_shape(p)),
        io_(nhwc_conv_run(p, shape_)),
        in_pitch_(pitch_param(p, "IN_PITCH", shape_.c_in)),
        block_m_(param_str(p, "BLOCK_M") == "auto" ? 0 : int(param_int(p, "BLOCK_M"))) {
    Conv2dInputs inputs = conv2d_random_inputs(shape_, io_.batch, io_.h, io_.w, seed);
    in_nchw_ = rounded_to(inputs.in, io_.type);
    weight_ = rounded_to(inputs.weight, io_.type);
    bias_ = std::move(inputs.bias);
    in_ = backend.upload_vector(
        to_nhwc(in_nchw_, io_.type, io_.batch, shape_.c_in, int64_t(io_.h) * io_.w, in_pitch_));
    if (param_bool(p, "RESIDUAL")) {
      residual_nchw_ = rounded_to(
          random_uniform(io_.out_pixels() * shape_.c_out, -1.0f, 1.0f, derive_seed(seed, "residual")),
          io_.type);
      residual_ = backend.upload_vector(
          to_nhwc(residual_nchw_, io_.type, io_.batch, shape_.c_out, int64_t(io_.ho) * io_.wo, shape_.c_out));
    }
    out_ = output_array<unsigned char>(io_.out_bytes());
    op_.emplace(backend, shape_, io_.type, weight_, bias_, block_n_param(p));
    split_.splits = split_param(p, *op_, io_);
    const Conv2dNhwcSplitSizes sizes = op_->split_sizes(io_.batch, io_.h, io_.w, split_.splits);
    if (sizes.arrivals) {
      partial_ = backend.alloc_array<float>(sizes.partial_floats);
      arrivals_ = backend.upload_vector(std::vector<unsigned>(sizes.arrivals, 0u));
      split_.partial = partial_.as<float>(), split_.arrivals = arrivals_.as<unsigned>();
    }
  }

  void launch() override {
    const size_t bytes = size_t(activation_bytes(io_.type));
    op_->run(io_.batch, io_.h, io_.w, {in_.as<unsigned char>(), in_pitch_},
             {out_.as<unsigned char>() + io_.out_offset * bytes, io_.out_pitch},
             residual_nchw_.empty() ? NhwcView{} : NhwcView{residual_.as<unsigned char>(), shape_.c_out},
             block_m_, split_);
  }

  std::vector<OutputCheck> check(const std::optional<Tolerance>& tol) override {
    return io_.check(
        fetch<unsigned char>(out_, io_.out_bytes()),
        conv2d_reference(shape_, io_.batch, io_.h, io_.w, in_nchw_, weight_, bias_, residual_nchw_), tol);
  }

  WorkCounts work() const override {
    const double outputs = double(io_.out_pixels()) * shape_.c_out;
    const double bytes = double(activation_bytes(io_.type)) *
                             (double(io_.batch) * io_.h * io_.w * shape_.c_in +
                              double(shape_.weight_count()) + outputs * (residual_nchw_.empty() ? 1 : 2)) +
                         4.0 * shape_.c_out;
    return {bytes, 2.0 * outputs * shape_.c_in * shape_.kernel * shape_.kernel};
  }

 private:
  Conv2dShape shape_;
  NhwcConvRun io_;
  int in_pitch_, block_m_;
  std::vector<float> in_nchw_, weight_, bias_, residual_nchw_;
  DeviceBuffer in_, residual_, out_;
  std::optional<Conv2dNhwcOp> op_;
  Conv2dNhwcSplitK split_;
  DeviceBuffer partial_, arrivals_;  // split-K's workspace (empty at SPLIT_K 1)
};

const bool registered = register_runner(conv2d_nhwc_spec(), make_instance<Conv2dNhwcInstance>());

}  // namespace
}  // namespace lab
