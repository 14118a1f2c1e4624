// conv2d_stem_nhwc's spec and runner: a seeded float32 NCHW input in [0, 1) (the network's scaled image),
// seeded float32 weights and bias, the output written into the channel slice [OUT_OFFSET, OUT_OFFSET + C_OUT)
// of a wider poisoned NHWC buffer (fp16, bf16 or float). Checked against conv2d_reference (float64) of the
// same float32 values under one unit in the last place of the element type, and the channels around the slice
// must keep their poison (check_nhwc_slice of nhwc_runner_support).
#include "kernels/common/activation_type.hpp"
#include "kernels/nn/conv2d_inputs.hpp"
#include "kernels/nn/conv2d_reference.hpp"
#include "kernels/nn/conv2d_stem_nhwc_op.hpp"
#include "kernels/nn/nhwc_runner_support.hpp"
#include "kernels/runner.hpp"
#include "nvrtc_runtime/errors.hpp"

namespace lab {
namespace {

Conv2dShape stem_shape(const Params& p) {
  Conv2dShape s;
  s.c_in = 3, s.kernel = 3, s.stride = 2;
  s.c_out = int(param_int(p, "C_OUT"));
  s.silu = param_bool(p, "SILU");
  return s;
}

// The parameters: the shape, the output type, the output slice (nhwc_out_slice_params).
std::vector<ParamSpec> conv2d_stem_nhwc_params() {
  using K = ParamSpec::Kind;
  std::vector<ParamSpec> params{
      {"B", K::Int, "1", "batch", 1, 256},
      {"C_OUT", K::Int, "16", "output channels (a multiple of 8, up to 64)", 8, 64, false, {}, 8},
      {"H", K::Int, "16", "input height", 1, 2048},
      {"W", K::Int, "16", "input width", 1, 2048},
      {"SILU", K::Bool, "true", "SiLU after the bias"},
      nhwc_dtype_param()};
  for (const ParamSpec& slice : nhwc_out_slice_params()) params.push_back(slice);
  return params;
}

const KernelSpec& conv2d_stem_nhwc_spec() {
  static const KernelSpec spec{
      .name = "conv2d_stem_nhwc",
      .family = "nn",
      .description =
          "the network's first Conv2d (3 -> C_OUT, 3x3 stride 2, +bias, SiLU): float32 NCHW input to "
          "NHWC fp16/bf16/f32, direct float FMAs",
      .source = "nn/conv2d_stem_nhwc.cu",
      .variants = {{"direct",
                    "one thread per output pixel, 27 float FMAs per channel with the weights broadcast from "
                    "shared memory, 16-byte stores"}},
      .params = conv2d_stem_nhwc_params(),
      .validate = [](const Params& p) { check_out_slice_params(p, "conv2d_stem_nhwc"); },
      .compile =
          [](const std::string&, const Params& p) {
            return conv2d_stem_nhwc_compile_request(parse_activation_type(param_str(p, "DTYPE")),
                                                    stem_shape(p));
          }};
  return spec;
}

class Conv2dStemNhwcInstance : public InstanceBase {
 public:
  Conv2dStemNhwcInstance(Backend& backend, const std::string&, const Params& p, uint64_t seed)
      : InstanceBase(backend), shape_(stem_shape(p)), io_(nhwc_conv_run(p, shape_)) {
    Conv2dInputs inputs = conv2d_random_inputs(shape_, io_.batch, io_.h, io_.w, seed);
    in_host_ = random_uniform(inputs.in.size(), 0.0f, 1.0f, derive_seed(seed, "image"));
    weight_ = std::move(inputs.weight);
    bias_ = std::move(inputs.bias);
    in_ = backend.upload_vector(in_host_);
    out_ = output_array<unsigned char>(io_.out_bytes());
    op_.emplace(backend, shape_, io_.type, weight_, bias_);
  }

  void launch() override {
    op_->run(io_.batch, io_.h, io_.w, in_.as<const float>(),
             {out_.as<unsigned char>() + io_.out_offset * size_t(activation_bytes(io_.type)), io_.out_pitch});
  }

  // Float32 sums of 27 products of O(1) terms: the output's rounding to the element type is the error (f32:
  // the float32 sums alone, far inside one_unit_tolerance's 2^-14).
  std::vector<OutputCheck> check(const std::optional<Tolerance>& tol) override {
    return io_.check(fetch<unsigned char>(out_, io_.out_bytes()),
                     conv2d_reference(shape_, io_.batch, io_.h, io_.w, in_host_, weight_, bias_, {}), tol);
  }

  WorkCounts work() const override {
    const double outputs = double(io_.out_pixels()) * shape_.c_out;
    const double bytes = 4.0 * (double(in_host_.size()) + double(weight_.size()) + shape_.c_out) +
                         double(activation_bytes(io_.type)) * outputs;
    return {bytes, 2.0 * outputs * 27};
  }

 private:
  Conv2dShape shape_;
  NhwcConvRun io_;
  std::vector<float> in_host_, weight_, bias_;
  DeviceBuffer in_, out_;
  std::optional<Conv2dStemNhwcOp> op_;
};

const bool registered = register_runner(conv2d_stem_nhwc_spec(), make_instance<Conv2dStemNhwcInstance>());

}  // namespace
}  // namespace lab
