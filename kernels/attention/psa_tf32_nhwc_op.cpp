// PsaTf32NhwcOp: the checks of the float NHWC views and the launch of psa_attention_tf32_nhwc (16 query rows
// per CTA, 256 threads, static shared memory only).
#include "kernels/attention/psa_tf32_nhwc_op.hpp"

#include "kernels/attention/psa_params.cuh"
#include "kernels/nn/conv2d_nhwc_op.hpp"
#include "nvrtc_runtime/errors.hpp"

namespace lab {
namespace {

constexpr const char* kKernel = "psa_attention_tf32_nhwc";

std::string kernel_name(ActivationType type, int key_dim) {
  if (type != ActivationType::tf32 && type != ActivationType::f32)
    throw UsageError("the float NHWC PSA attention runs tf32 or f32 activations, not " +
                     activation_type_name(type));
  return std::string(kKernel) + "<" + std::to_string(key_dim) + ", " + activation_template_arg(type) + ">";
}

const PsaDims& checked(const PsaDims& dims) {
  if (const std::string problem = psa_fused_problem(dims.key_dim); !problem.empty())
    throw UsageError("the float NHWC PSA attention " + problem);
  return dims;
}

}  // namespace

CompileRequest psa_tf32_nhwc_compile_request(ActivationType type, int key_dim) {
  return {kPsaTcSource, {}, {kernel_name(type, key_dim)}};
}

PsaTf32NhwcOp::PsaTf32NhwcOp(Backend& backend, ActivationType type, const PsaDims& dims)
    : backend_(backend),
      dims_(checked(dims)),
      module_(backend.compile(psa_tf32_nhwc_compile_request(type, dims.key_dim))),
      forward_(module_->kernel(kernel_name(type, dims.key_dim))) {}

void PsaTf32NhwcOp::forward_nhwc(const void* qkv, int qkv_pitch, void* merged, int merged_pitch, void* v_out,
                                 int v_pitch, float* lse) const {
  check_psa_nhwc_views(kKernel, dims_, qkv, qkv_pitch, merged, merged_pitch, v_out, v_pitch);
  const PsaTf32NhwcParams p{static_cast<const float*>(qkv),
                            static_cast<float*>(merged),
                            static_cast<float*>(v_out),
                            lse,
                            qkv_pitch,
                            merged_pitch,
                            v_pitch,
                            dims_.num_heads,
                            dims_.n,
                            dims_.softmax_scale()};
  const LaunchConfig cfg{{unsigned((dims_.n + 15) / 16), unsigned(dims_.batch_heads()), 1},
                         {256, 1, 1},
                         0,
                         /*programmatic_dependent=*/true};  // the kernel waits for its predecessor
  backend_.launch(forward_, cfg, kernel_params(p));
}

}  // namespace lab
