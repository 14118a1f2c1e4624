// PsaHalfOp: the launch shapes of psa_attention_half and psa_attention_half_nhwc (16 query rows per CTA; 256
// threads and static shared memory only, psa_tc.cu), of their _w16 versions (512 threads and
// psa_w16_shared_bytes of dynamic shared memory, psa_tc_w16.cu) and of psa_attention_half_nhwc_staged (256
// threads, psa_staged_shared_bytes; NHWC only), and the checks of the NHWC views.
#include "kernels/attention/psa_half_op.hpp"

#include "kernels/attention/psa_params.cuh"
#include "kernels/nn/conv2d_nhwc_op.hpp"
#include "nvrtc_runtime/errors.hpp"

namespace lab {
namespace {

constexpr const char* kNchw = "psa_attention_half";
constexpr const char* kNhwc = "psa_attention_half_nhwc";

PsaHalfVariant parse_variant(const std::string& variant) {
  if (variant == "mma") return PsaHalfVariant::Mma;
  if (variant == "mma_w16") return PsaHalfVariant::MmaW16;
  if (variant == "mma_staged") return PsaHalfVariant::MmaStaged;
  throw UsageError("the 16-bit PSA attention has no variant '" + variant + "' (mma, mma_w16, mma_staged)");
}

// The entry of `kernel` (kNchw or kNhwc) in `variant`.
std::string kernel_name(const char* kernel, PsaHalfVariant variant, HalfType type, int key_dim) {
  const char* suffix = variant == PsaHalfVariant::MmaW16      ? "_w16"
                       : variant == PsaHalfVariant::MmaStaged ? "_staged"
                                                              : "";
  return std::string(kernel) + suffix + "<" + std::to_string(key_dim) + ", " + half_type_template_arg(type) +
         ">";
}

const PsaDims& checked(const PsaDims& dims, const std::string& variant) {
  if (const std::string problem = psa_fused_problem(dims.key_dim); !problem.empty())
    throw UsageError("the 16-bit PSA attention " + problem);
  if (parse_variant(variant) == PsaHalfVariant::MmaStaged && dims.n > kPsaFusedMaxTokens)
    throw UsageError(
        "variant mma_staged of the 16-bit PSA attention stages a head's keys in shared memory: at "
        "most " +
        std::to_string(kPsaFusedMaxTokens) + " tokens (got " + std::to_string(dims.n) + ")");
  return dims;
}

}  // namespace

void check_psa_nhwc_views(const char* kernel, const PsaDims& dims, const void* qkv, int qkv_pitch,
                          const void* merged, int merged_pitch, const void* v_out, int v_pitch) {
  const int out_channels = dims.num_heads * 2 * dims.key_dim;
  check_nhwc_view(kernel, "qkv", {const_cast<void*>(qkv), qkv_pitch}, 2 * out_channels);
  check_nhwc_view(kernel, "merged", {const_cast<void*>(merged), merged_pitch}, out_channels);
  check_nhwc_view(kernel, "v_out", {const_cast<void*>(v_out), v_pitch}, out_channels);
}

CompileRequest psa_half_compile_request(const std::string& variant, HalfType type, int key_dim) {
  const PsaHalfVariant v = parse_variant(variant);
  if (v == PsaHalfVariant::MmaStaged) return {kPsaTcSource, {}, {kernel_name(kNhwc, v, type, key_dim)}};
  return {v == PsaHalfVariant::MmaW16 ? kPsaTcW16Source : kPsaTcSource,
          {},
          {kernel_name(kNchw, v, type, key_dim), kernel_name(kNhwc, v, type, key_dim)}};
}

PsaHalfOp::PsaHalfOp(Backend& backend, const std::string& variant, HalfType type, const PsaDims& dims)
    : backend_(backend),
      dims_(checked(dims, variant)),
      variant_(parse_variant(variant)),
      module_(backend.compile(psa_half_compile_request(variant, type, dims.key_dim))),
      forward_nhwc_(module_->kernel(kernel_name(kNhwc, variant_, type, dims.key_dim))) {
  if (variant_ != PsaHalfVariant::MmaStaged)
    forward_ = module_->kernel(kernel_name(kNchw, variant_, type, dims.key_dim));
}

void PsaHalfOp::forward(const uint16_t* qkv, uint16_t* merged, uint16_t* v_out, float* lse) const {
  if (variant_ == PsaHalfVariant::MmaStaged)
    throw UsageError("variant mma_staged of the 16-bit PSA attention reads NHWC views only (forward_nhwc)");
  const int bh = dims_.batch_heads(), n = dims_.n;
  const PsaHalfParams p{qkv, merged, v_out, lse, bh, n, dims_.softmax_scale()};
  backend_.launch(forward_, launch_shape(), kernel_params(p));
}
void PsaHalfOp::forward_nhwc(const void* qkv, int qkv_pitch, void* merged, int merged_pitch, void* v_out,
                             int v_pitch, float* lse) const {
  check_psa_nhwc_views(kNhwc, dims_, qkv, qkv_pitch, merged, merged_pitch, v_out, v_pitch);
  const PsaHalfNhwcParams p{static_cast<const uint16_t*>(qkv),
                            static_cast<uint16_t*>(merged),
                            static_cast<uint16_t*>(v_out),
                            lse,
                            qkv_pitch,
                            merged_pitch,
                            v_pitch,
                            dims_.num_heads,
                            dims_.n,
                            dims_.softmax_scale()};
  LaunchConfig cfg = launch_shape();
  cfg.programmatic_dependent = true;  // the _nhwc kernels wait for their predecessor (not the NCHW ones)
  backend_.launch(forward_nhwc_, cfg, kernel_params(p));
}

LaunchConfig PsaHalfOp::launch_shape() const {
  const Dim3 grid{unsigned((dims_.n + 15) / 16), unsigned(dims_.batch_heads()), 1};
  if (variant_ == PsaHalfVariant::MmaW16)
    return {grid, {32 * kPsaW16Warps, 1, 1}, size_t(psa_w16_shared_bytes(dims_.key_dim))};
  if (variant_ == PsaHalfVariant::MmaStaged)
    return {grid, {256, 1, 1}, size_t(psa_staged_shared_bytes(dims_.key_dim, dims_.n))};
  return {grid, {256, 1, 1}};
}

}  // namespace lab
