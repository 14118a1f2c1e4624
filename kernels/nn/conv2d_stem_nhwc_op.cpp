// Conv2dStemNhwcOp: the shape rule, the float32 weights and bias uploaded once, and the launch of
// conv2d_stem_nhwc (one instance per element type and C_out).
#include "kernels/nn/conv2d_stem_nhwc_op.hpp"

#include "kernels/nn/conv2d_stem_nhwc_params.cuh"
#include "nvrtc_runtime/errors.hpp"

namespace lab {

std::string conv2d_stem_nhwc_problem(const Conv2dShape& s) {
  if (s.c_in != 3 || s.kernel != 3 || s.stride != 2 || s.groups != 1)
    return "conv2d_stem_nhwc: the stem is a dense 3x3 stride 2 conv of 3 input channels, not C_IN " +
           std::to_string(s.c_in) + " K " + std::to_string(s.kernel) + " stride " + std::to_string(s.stride) +
           " groups " + std::to_string(s.groups);
  if (s.c_out % 8 != 0 || s.c_out > 64)
    return "conv2d_stem_nhwc: C_OUT a multiple of 8 (16-byte stores) up to 64, not " +
           std::to_string(s.c_out);
  return "";
}

CompileRequest conv2d_stem_nhwc_compile_request(ActivationType type, const Conv2dShape& s) {
  return {"nn/conv2d_stem_nhwc.cu",
          {},
          {"conv2d_stem_nhwc<" + activation_template_arg(type) + ", " + std::to_string(s.c_out) + ">"}};
}

Conv2dStemNhwcOp::Conv2dStemNhwcOp(Backend& backend, const Conv2dShape& shape, ActivationType type,
                                   const std::vector<float>& weight, const std::vector<float>& bias)
    : backend_(backend), shape_(shape) {
  check_conv_arguments("conv2d_stem_nhwc", conv2d_stem_nhwc_problem(shape), shape, weight, bias);
  const CompileRequest request = conv2d_stem_nhwc_compile_request(type, shape);
  module_ = backend.compile(request);
  kernel_ = module_->kernel(request.name_expressions[0]);
  weight_ = backend.upload_vector(weight);
  bias_ = backend.upload_vector(bias);
}

void Conv2dStemNhwcOp::run(int batch, int h, int w, const float* in, NhwcView out) const {
  if (!in) throw UsageError("conv2d_stem_nhwc: the input tensor is not set");
  if (batch < 1 || h < 1 || w < 1)
    throw UsageError("conv2d_stem_nhwc: batch, height and width are positive, not " + std::to_string(batch) +
                     " x " + std::to_string(h) + " x " + std::to_string(w));
  check_nhwc_view("conv2d_stem_nhwc", "output", out, shape_.c_out);
  const int ho = shape_.out_size(h), wo = shape_.out_size(w);
  const int64_t m = int64_t(batch) * ho * wo;
  const Conv2dStemNhwcParams p{
      in,        weight_.as<const float>(), bias_.as<const float>(), out.data, int(m), h, w, ho, wo,
      out.pitch, shape_.silu ? 1 : 0};
  const LaunchConfig cfg{{unsigned((m + kConv2dStemThreads - 1) / kConv2dStemThreads), 1, 1},
                         {unsigned(kConv2dStemThreads), 1, 1},
                         0,
                         /*programmatic_dependent=*/true};  // the kernel waits for its predecessor
  backend_.launch(kernel_, cfg, kernel_params(p));
}

}  // namespace lab
