// PsaOp: launch shapes of the psa.cu kernels (and of psa_tc.cu's fused_tc forward) and the composition of the
// PSA attention forward and backward.
#include "kernels/attention/psa_op.hpp"

#include "kernels/attention/psa_params.cuh"
#include "nvrtc_runtime/errors.hpp"

namespace lab {
namespace {

constexpr unsigned kTile = 32;

unsigned ceil_div(size_t a, size_t b) {
  return unsigned((a + b - 1) / b);
}

std::string fused_kernel_name(int key_dim) {
  return "psa_attention_fused<" + std::to_string(key_dim) + ">";
}

// The tensor-core forwards: `fused_tc` (psa_tc.cu, 8 warps a CTA) and `fused_tc_w16` (psa_tc_w16.cu, 16).
bool is_tensor_core(const std::string& variant) {
  return variant == "fused_tc" || variant == "fused_tc_w16";
}

std::string fused_tc_kernel_name(const std::string& variant, int key_dim) {
  return "psa_attention_" + variant + "<" + std::to_string(key_dim) + ">";
}

bool is_fused(const std::string& variant) {
  return variant == "fused" || is_tensor_core(variant);
}

CompileRequest fused_tc_request(const std::string& variant, int key_dim) {
  return {
      variant == "fused_tc" ? kPsaTcSource : kPsaTcW16Source, {}, {fused_tc_kernel_name(variant, key_dim)}};
}

// psa.cu's four rearrangements around the passes, for the 16-bit ones in their type.
struct Rearrangements {
  std::string pack, merge, merge_bwd, qkv_grad;
};
Rearrangements rearrangements_of(const std::optional<HalfType>& half) {
  if (!half) return {"psa_pack_qkv", "psa_merge_attn", "psa_merge_attn_bwd", "psa_qkv_grad"};
  const std::string dt = "<" + half_type_template_arg(*half) + ">";
  return {"psa_pack_qkv_half" + dt, "psa_merge_attn_half" + dt, "psa_merge_attn_bwd_half" + dt,
          "psa_qkv_grad_half" + dt};
}

// The FA2 variant behind a PSA variant: the fused ones run their backward on the tiled FA2.
std::string fa2_variant_of(const std::string& variant, const PsaDims& dims) {
  if (!is_fused(variant)) return variant;
  if (const std::string problem = psa_fused_problem(dims.key_dim); !problem.empty())
    throw UsageError("variant " + variant + " of the PSA attention " + problem);
  return "tiled";
}

Fa2Blocks fa2_blocks_of(const PsaDims& dims) {
  return choose_fa2_blocks(dims.batch_heads(), dims.n, dims.n, dims.key_dim);
}

CompileRequest fa2_request_of(const std::string& variant, const PsaDims& dims) {
  if (const std::optional<HalfType> half = psa_half_type(variant))
    return fa2_half_compile_request(*half, dims.key_dim, fa2_mma_default_config(dims.key_dim));
  return fa2_compile_request(fa2_variant_of(variant, dims), dims.key_dim, fa2_blocks_of(dims));
}

CompileRequest psa_module_request(const std::string& variant, int key_dim) {
  const Rearrangements r = rearrangements_of(psa_half_type(variant));
  CompileRequest request{kPsaSource, {}, {r.pack, "psa_extract_v", r.merge, r.merge_bwd, r.qkv_grad}};
  if (variant == "fused") request.name_expressions.push_back(fused_kernel_name(key_dim));
  return request;
}

}  // namespace

std::optional<HalfType> psa_half_type(const std::string& variant) {
  if (variant == "mma_fp16") return HalfType::f16;
  if (variant == "mma_bf16") return HalfType::bf16;
  return std::nullopt;
}

std::string psa_half_problem(int key_dim) {
  return fa2_half_head_dim_supported(key_dim)
             ? ""
             : "needs KEY_DIM 32, 64, 128 or 256 (got " + std::to_string(key_dim) + ")";
}

std::string psa_fused_problem(int key_dim) {
  return key_dim == 16 || key_dim == 32 ? "" : "needs KEY_DIM 16 or 32 (got " + std::to_string(key_dim) + ")";
}

CompileRequest psa_attention_compile_request(const std::string& variant, const PsaDims& dims) {
  if (variant == "fused") return CompileRequest{kPsaSource, {}, {fused_kernel_name(dims.key_dim)}};
  if (is_tensor_core(variant)) return fused_tc_request(variant, dims.key_dim);
  return fa2_request_of(variant, dims);
}

std::vector<CompileRequest> psa_compile_requests(const std::string& variant, const PsaDims& dims) {
  std::vector<CompileRequest> requests{psa_module_request(variant, dims.key_dim),
                                       fa2_request_of(variant, dims)};
  if (is_tensor_core(variant)) requests.push_back(fused_tc_request(variant, dims.key_dim));
  return requests;
}

PsaOp::PsaOp(Backend& backend, const std::string& variant, const PsaDims& dims)
    : backend_(backend),
      dims_(dims),
      half_(psa_half_type(variant)),
      fused_(variant == "fused"),
      fused_tc_(is_tensor_core(variant)),
      w16_(variant == "fused_tc_w16"),
      module_(backend.compile(psa_module_request(variant, dims.key_dim))),
      tc_module_(fused_tc_ ? backend.compile(fused_tc_request(variant, dims.key_dim)) : nullptr) {
  if (half_)
    fa2_half_.emplace(backend, *half_, dims.key_dim, fa2_mma_default_config(dims.key_dim));
  else
    fa2_.emplace(backend, fa2_variant_of(variant, dims), dims.key_dim, fa2_blocks_of(dims));
  const Rearrangements r = rearrangements_of(half_);
  pack_ = module_->kernel(r.pack), extract_ = module_->kernel("psa_extract_v");
  merge_ = module_->kernel(r.merge), merge_bwd_ = module_->kernel(r.merge_bwd);
  qkv_grad_ = module_->kernel(r.qkv_grad);
  if (fused_) fused_forward_ = module_->kernel(fused_kernel_name(dims.key_dim));
  if (fused_tc_) fused_forward_ = tc_module_->kernel(fused_tc_kernel_name(variant, dims.key_dim));
}

const FlashAttn2Op& PsaOp::fa2() const {
  if (!fa2_) throw RuntimeError("PSA attention: the 16-bit variants have no float Flash Attention 2 op");
  return *fa2_;
}

PsaWorkspace PsaOp::workspace() const {
  const size_t head = dims_.head_elems(), rows = size_t(dims_.batch_heads()) * dims_.n;
  auto floats = [this](size_t count) { return backend_.alloc_array<float>(count); };
  // The Flash Attention side in its element type.
  auto elements = [this](size_t count) { return backend_.alloc(count * (half_ ? 2 : sizeof(float))); };
  // packed, o_lo, o_hi, lse, do_lo, do_hi, delta, grads
  return {elements(4 * head), elements(head), elements(head), floats(rows),
          elements(head),     elements(head), floats(rows),   elements(6 * head)};
}

// Grid (ceil(N / 32), ceil(KD / 32), BH * sections_per_head), block (32, 8): psa.cu's tile transposes.
LaunchConfig PsaOp::transpose_config(int sections_per_head) const {
  return {{ceil_div(size_t(dims_.n), kTile), ceil_div(size_t(dims_.key_dim), kTile),
           unsigned(dims_.batch_heads() * sections_per_head)},
          {kTile, 8, 1}};
}

void PsaOp::pack_qkv(const float* qkv, float* packed) const {
  const PsaSplitQkvParams p{qkv, packed, dims_.batch_heads(), dims_.key_dim, dims_.n};
  backend_.launch(pack_, transpose_config(4), kernel_params(p));
}

void PsaOp::extract_v(const float* qkv, float* v_out) const {
  const PsaSplitQkvParams p{qkv, v_out, dims_.batch_heads(), dims_.key_dim, dims_.n};
  backend_.launch(extract_, {{ceil_div(2 * dims_.head_elems(), 256), 1, 1}, {256, 1, 1}}, kernel_params(p));
}

void PsaOp::merge_attn(const float* o_lo, const float* o_hi, float* merged) const {
  const PsaMergeParams p{o_lo, o_hi, merged, dims_.key_dim, dims_.n};
  backend_.launch(merge_, transpose_config(2), kernel_params(p));
}

// The composed path's rearrangements on the 16-bit side (psa.cu's _half<DT> kernels), and the two that only
// the backward runs on either side.
void PsaOp::pack_qkv(const float* qkv, uint16_t* packed) const {
  const PsaPackHalfParams p{qkv, packed, dims_.batch_heads(), dims_.key_dim, dims_.n};
  backend_.launch(pack_, transpose_config(4), kernel_params(p));
}

void PsaOp::merge_attn(const uint16_t* o_lo, const uint16_t* o_hi, float* merged) const {
  const PsaMergeHalfParams p{o_lo, o_hi, merged, dims_.key_dim, dims_.n};
  backend_.launch(merge_, transpose_config(2), kernel_params(p));
}

void PsaOp::merge_attn_bwd(const float* d_merged, float* do_lo, float* do_hi) const {
  const PsaMergeBwdParams p{d_merged, do_lo, do_hi, dims_.key_dim, dims_.n};
  backend_.launch(merge_bwd_, transpose_config(2), kernel_params(p));
}

void PsaOp::merge_attn_bwd(const float* d_merged, uint16_t* do_lo, uint16_t* do_hi) const {
  const PsaMergeBwdHalfParams p{d_merged, do_lo, do_hi, dims_.key_dim, dims_.n};
  backend_.launch(merge_bwd_, transpose_config(2), kernel_params(p));
}

void PsaOp::qkv_grad(const float* grads, const float* d_v, float* d_qkv) const {
  const PsaQkvGradParams p{grads, d_v, d_qkv, dims_.batch_heads(), dims_.key_dim, dims_.n};
  backend_.launch(qkv_grad_, transpose_config(4), kernel_params(p));
}

void PsaOp::qkv_grad(const uint16_t* grads, const float* d_v, float* d_qkv) const {
  const PsaQkvGradHalfParams p{grads, d_v, d_qkv, dims_.batch_heads(), dims_.key_dim, dims_.n};
  backend_.launch(qkv_grad_, transpose_config(4), kernel_params(p));
}

// The composed forward with the Flash Attention side in T (float, or 16-bit patterns) on `fa2` (FlashAttn2Op,
// FlashAttn2HalfOp): pack, the two passes (V_lo, then V_hi, sharing Q, K and L), merge, extract-V.
template <class T, class Fa2>
void PsaOp::composed_forward(const Fa2& fa2, const float* qkv, float* merged, float* v_out,
                             PsaWorkspace& ws) const {
  const size_t head = dims_.head_elems();
  T* packed = ws.packed.as<T>();
  const T *q = packed, *k = packed + head, *v_lo = packed + 2 * head, *v_hi = packed + 3 * head;
  const AttentionProblem p{dims_.batch_heads(), dims_.n, dims_.n, dims_.softmax_scale()};
  pack_qkv(qkv, packed);
  fa2.forward(q, k, v_lo, ws.o_lo.as<T>(), ws.lse.as<float>(), p);
  fa2.forward(q, k, v_hi, ws.o_hi.as<T>(), ws.lse.as<float>(), p);  // rewrites the same L
  merge_attn(ws.o_lo.as<const T>(), ws.o_hi.as<const T>(), merged);
  extract_v(qkv, v_out);
}

// The backward the same way: merge backward, the two passes' backward into grads [2 passes][dQ, dK, dV][BH,
// N, KD], and the d_qkv assembly, which adds the passes' dQ and dK in float.
template <class T, class Fa2>
void PsaOp::composed_backward(const Fa2& fa2, const float* d_merged, const float* d_v, float* d_qkv,
                              PsaWorkspace& ws) const {
  const size_t head = dims_.head_elems();
  const T* packed = ws.packed.as<const T>();
  const T *q = packed, *k = packed + head, *v_lo = packed + 2 * head, *v_hi = packed + 3 * head;
  const AttentionProblem p{dims_.batch_heads(), dims_.n, dims_.n, dims_.softmax_scale()};
  merge_attn_bwd(d_merged, ws.do_lo.as<T>(), ws.do_hi.as<T>());
  T* g = ws.grads.as<T>();
  const float* lse = ws.lse.as<const float>();
  fa2.backward(q, k, v_lo, ws.o_lo.as<const T>(), ws.do_lo.as<const T>(), lse, ws.delta.as<float>(), g,
               g + head, g + 2 * head, p);
  fa2.backward(q, k, v_hi, ws.o_hi.as<const T>(), ws.do_hi.as<const T>(), lse, ws.delta.as<float>(),
               g + 3 * head, g + 4 * head, g + 5 * head, p);
  qkv_grad(g, d_v, d_qkv);
}

void PsaOp::forward(const float* qkv, float* merged, float* v_out, PsaWorkspace& ws) const {
  if (fused_ || fused_tc_) {
    float *packed = ws.packed.as<float>(), *o_lo = ws.o_lo.as<float>(), *o_hi = ws.o_hi.as<float>();
    float* lse = ws.lse.as<float>();
    const int bh = dims_.batch_heads(), n = dims_.n;
    const PsaFusedParams p{qkv, merged, v_out, packed, o_lo, o_hi, lse, bh, n, dims_.softmax_scale()};
    // psa.cu: kFusedQueries = 8 rows per CTA, kFusedThreads = 256, dynamic shared memory: the warps' V tiles.
    // psa_tc.cu: kRows = 16 rows per CTA, kThreads = 256, static shared memory only.
    // psa_tc_w16.cu: 16 rows per CTA, 16 warps, dynamic shared memory: the warps' partial states.
    const size_t shared_bytes = fused_ ? size_t(8) * 2 * dims_.key_dim * 33 * sizeof(float)
                                : w16_ ? size_t(psa_w16_shared_bytes(dims_.key_dim))
                                       : 0;
    const unsigned rows_per_cta = fused_ ? 8 : 16, threads = w16_ ? 32 * kPsaW16Warps : 256;
    backend_.launch(fused_forward_,
                    {{ceil_div(size_t(n), rows_per_cta), unsigned(bh), 1}, {threads, 1, 1}, shared_bytes},
                    kernel_params(p));
    return;
  }
  if (half_)
    composed_forward<uint16_t>(*fa2_half_, qkv, merged, v_out, ws);
  else
    composed_forward<float>(*fa2_, qkv, merged, v_out, ws);
}

void PsaOp::backward(const float* d_merged, const float* d_v, float* d_qkv, PsaWorkspace& ws) const {
  if (half_)
    composed_backward<uint16_t>(*fa2_half_, d_merged, d_v, d_qkv, ws);
  else
    composed_backward<float>(*fa2_, d_merged, d_v, d_qkv, ws);
}

}  // namespace lab
