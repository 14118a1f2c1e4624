// PsaHalfOp: the launch shape of psa_attention_half and psa_attention_half_nhwc (16 query rows and 256
// threads per CTA, static shared memory only; psa_tc.cu) and the checks of the NHWC views.
#include "kernels/attention/psa_half_op.hpp"

#include "kernels/attention/psa_params.cuh"
#include "kernels/nn/conv2d_nhwc_op.hpp"
#include "nvrtc_runtime/errors.hpp"

namespace lab {
namespace {

std::string kernel_name(const char* kernel, HalfType type, int key_dim) {
  return std::string(kernel) + "<" + std::to_string(key_dim) + ", " + half_type_template_arg(type) + ">";
}
constexpr const char* kNchw = "psa_attention_half";
constexpr const char* kNhwc = "psa_attention_half_nhwc";

const PsaDims& checked(const PsaDims& dims) {
  if (const std::string problem = psa_fused_problem(dims.key_dim); !problem.empty())
    throw UsageError("the 16-bit PSA attention " + problem);
  return dims;
}

}  // namespace

CompileRequest psa_half_compile_request(HalfType type, int key_dim) {
  return {kPsaTcSource, {}, {kernel_name(kNchw, type, key_dim), kernel_name(kNhwc, type, key_dim)}};
}

PsaHalfOp::PsaHalfOp(Backend& backend, HalfType type, const PsaDims& dims)
    : backend_(backend),
      dims_(checked(dims)),
      module_(backend.compile(psa_half_compile_request(type, dims.key_dim))),
      forward_(module_->kernel(kernel_name(kNchw, type, dims.key_dim))),
      forward_nhwc_(module_->kernel(kernel_name(kNhwc, type, dims.key_dim))) {}

void PsaHalfOp::forward(const uint16_t* qkv, uint16_t* merged, uint16_t* v_out, float* lse) const {
  const int bh = dims_.batch_heads(), n = dims_.n;
  const PsaHalfParams p{qkv, merged, v_out, lse, bh, n, dims_.softmax_scale()};
  backend_.launch(forward_, launch_shape(), kernel_params(p));
}

void PsaHalfOp::forward_nhwc(const uint16_t* qkv, int qkv_pitch, uint16_t* merged, int merged_pitch,
                             uint16_t* v_out, int v_pitch, float* lse) const {
  const int out_channels = dims_.num_heads * 2 * dims_.key_dim;
  check_nhwc_view(kNhwc, "qkv", {const_cast<uint16_t*>(qkv), qkv_pitch}, 2 * out_channels);
  check_nhwc_view(kNhwc, "merged", {merged, merged_pitch}, out_channels);
  check_nhwc_view(kNhwc, "v_out", {v_out, v_pitch}, out_channels);
  const PsaHalfNhwcParams p{qkv,          merged,  v_out,           lse,     qkv_pitch,
                            merged_pitch, v_pitch, dims_.num_heads, dims_.n, dims_.softmax_scale()};
  LaunchConfig cfg = launch_shape();
  cfg.programmatic_dependent = true;  // psa_attention_half_nhwc waits for its predecessor (not the NCHW one)
  backend_.launch(forward_nhwc_, cfg, kernel_params(p));
}

LaunchConfig PsaHalfOp::launch_shape() const {
  return {{unsigned((dims_.n + 15) / 16), unsigned(dims_.batch_heads()), 1}, {256, 1, 1}};
}

}  // namespace lab
