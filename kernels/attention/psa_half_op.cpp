// PsaHalfOp: the launch shape of psa_attention_half (16 query rows and 256 threads per CTA, static shared
// memory only; psa_tc.cu).
#include "kernels/attention/psa_half_op.hpp"

#include "kernels/attention/psa_params.cuh"
#include "nvrtc_runtime/errors.hpp"

namespace lab {
namespace {

std::string kernel_name(HalfType type, int key_dim) {
  return "psa_attention_half<" + std::to_string(key_dim) + ", " + half_type_template_arg(type) + ">";
}

const PsaDims& checked(const PsaDims& dims) {
  if (const std::string problem = psa_fused_problem(dims.key_dim); !problem.empty())
    throw UsageError("the 16-bit PSA attention " + problem);
  return dims;
}

}  // namespace

CompileRequest psa_half_compile_request(HalfType type, int key_dim) {
  return {kPsaTcSource, {}, {kernel_name(type, key_dim)}};
}

PsaHalfOp::PsaHalfOp(Backend& backend, HalfType type, const PsaDims& dims)
    : backend_(backend),
      dims_(checked(dims)),
      module_(backend.compile(psa_half_compile_request(type, dims.key_dim))),
      forward_(module_->kernel(kernel_name(type, dims.key_dim))) {}

void PsaHalfOp::forward(const uint16_t* qkv, uint16_t* merged, uint16_t* v_out, float* lse) const {
  const int bh = dims_.batch_heads(), n = dims_.n;
  const PsaHalfParams p{qkv, merged, v_out, lse, bh, n, dims_.softmax_scale()};
  backend_.launch(forward_, {{unsigned((n + 15) / 16), unsigned(bh), 1}, {256, 1, 1}}, kernel_params(p));
}

}  // namespace lab
