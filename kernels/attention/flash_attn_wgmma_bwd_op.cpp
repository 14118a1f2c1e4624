// FlashAttnWgmmaBackwardOp: the tile configuration per HEAD_DIM, the tensor maps of Q, dO, K and V, and the
// launches of flash_attn_wgmma_bwd between flash_attn2_mma.cu's preprocess and dQ conversion.
#include "kernels/attention/flash_attn_wgmma_bwd_op.hpp"

#include "kernels/attention/flash_attn2_half_op.hpp"
#include "kernels/attention/flash_attn_wgmma_bwd_params.cuh"
#include "nvrtc_runtime/errors.hpp"
#include "nvrtc_runtime/tensor_map.hpp"

namespace lab {
namespace {

constexpr int kBlockN = 128;  // keys per CTA (two consumer warpgroups)
constexpr int kStages = 2;    // the Q / dO ring

// Queries per tile: each consumer's dQ block is 64 x 64 (flash_attn_wgmma_bwd.cu), so 128 at HEAD_DIM 64
// and 64 at HEAD_DIM 128, where the dK and dV accumulators (64 floats a thread each) leave room for no more.
int block_m(int head_dim) {
  if (const std::string problem = fa_wgmma_bwd_head_dim_problem(head_dim); !problem.empty())
    throw UsageError("flash attention backward " + problem);
  return head_dim == 64 ? 128 : 64;
}

// The kernel's Smem<...>::bytes + 1024 of alignment slack.
size_t shared_bytes(int head_dim, bool fused_dq) {
  const size_t bm = block_m(head_dim), kv = size_t(kBlockN) * head_dim * 2, tile = bm * head_dim * 2;
  const size_t ds = fused_dq ? 2 * size_t(kBlockN) * bm * 2 : 0;
  return 2 * kv + 2 * kStages * tile + ds + 2 * kStages * bm * 4 + (1 + 2 * kStages) * 8 + 1024;
}

std::string entry(HalfType type, int head_dim, bool fused_dq) {
  return "flash_attn_wgmma_bwd<" + half_type_template_arg(type) + ", " + std::to_string(head_dim) + ", " +
         std::to_string(block_m(head_dim)) + ", " + std::to_string(kStages) + ", " +
         (fused_dq ? "true" : "false") + ">";
}

// Where the dQ accumulator starts in the scratch: after D, at a 16-byte boundary (the kernel adds into it with
// 8-byte vector reductions).
size_t dq_acc_offset(size_t rows) { return (rows + 3) / 4 * 4; }

}  // namespace

std::string fa_wgmma_bwd_head_dim_problem(int head_dim) {
  if (head_dim == 64 || head_dim == 128) return "";
  return "wgmma backward: HEAD_DIM 64 or 128 (at 256 the dK and dV accumulators alone would take 256 "
         "registers a thread), not " +
         std::to_string(head_dim);
}

CompileRequest fa_wgmma_bwd_compile_request(HalfType type, int head_dim) {
  CompileRequest r{kFlashAttnWgmmaBwdSource, {}, {entry(type, head_dim, true), entry(type, head_dim, false)}};
  r.arch_specific = true;
  return r;
}

FlashAttnWgmmaBackwardOp::FlashAttnWgmmaBackwardOp(Backend& backend, HalfType type, int head_dim)
    : backend_(backend), type_(type), head_dim_(head_dim), forward_(backend, type, head_dim) {
  const CompileRequest request = fa_wgmma_bwd_compile_request(type, head_dim);
  module_ = backend.compile(request);
  fused_ = module_->kernel(request.name_expressions[0]);
  dkdv_ = module_->kernel(request.name_expressions[1]);
  const CompileRequest ends{
      kFlashAttn2MmaSource, {}, {fa2_half_preprocess_entry(type, head_dim), fa2_half_dq_convert_entry(type)}};
  ends_module_ = backend.compile(ends);
  preprocess_ = ends_module_->kernel(ends.name_expressions[0]);
  convert_ = ends_module_->kernel(ends.name_expressions[1]);
}

void FlashAttnWgmmaBackwardOp::forward(const uint16_t* q, const uint16_t* k, const uint16_t* v, uint16_t* o,
                                       float* lse, const AttentionProblem& p) const {
  forward_.forward(q, k, v, o, lse, p);
}

size_t FlashAttnWgmmaBackwardOp::backward_scratch_floats(const AttentionProblem& p) const {
  const size_t rows = size_t(p.batch_heads) * p.n_q;
  return dq_acc_offset(rows) + rows * head_dim_;
}

void FlashAttnWgmmaBackwardOp::backward(const uint16_t* q, const uint16_t* k, const uint16_t* v,
                                        const uint16_t* o, const uint16_t* d_o, const float* lse,
                                        float* scratch, uint16_t* dq, uint16_t* dk, uint16_t* dv,
                                        const AttentionProblem& p) const {
  const int rows = p.batch_heads * p.n_q, count = rows * head_dim_;
  float* delta = scratch;
  float* dq_acc = scratch + dq_acc_offset(size_t(rows));
  backward_preprocess(o, d_o, delta, p);
  backend_.fill_bytes(dq_acc, 0, sizeof(float) * size_t(count));
  launch(fused_, true, q, k, v, d_o, lse, delta, dk, dv, dq_acc, p);
  launch_fa2_half_dq_convert(backend_, convert_, dq_acc, dq, count, p.scale);
}

void FlashAttnWgmmaBackwardOp::backward_preprocess(const uint16_t* o, const uint16_t* d_o, float* delta,
                                                   const AttentionProblem& p) const {
  launch_fa2_half_preprocess(backend_, preprocess_, head_dim_, o, d_o, delta, p);
}

void FlashAttnWgmmaBackwardOp::backward_dkdv(const uint16_t* q, const uint16_t* k, const uint16_t* v,
                                             const uint16_t* d_o, const float* lse, const float* delta,
                                             uint16_t* dk, uint16_t* dv, const AttentionProblem& p) const {
  launch(dkdv_, false, q, k, v, d_o, lse, delta, dk, dv, nullptr, p);
}

void FlashAttnWgmmaBackwardOp::launch(const Kernel& kernel, bool fused_dq, const uint16_t* q,
                                      const uint16_t* k, const uint16_t* v, const uint16_t* d_o,
                                      const float* lse, const float* delta, uint16_t* dk, uint16_t* dv,
                                      float* dq_acc, const AttentionProblem& p) const {
  const int bm = block_m(head_dim_), bh = p.batch_heads;
  const FlashAttnWgmmaBwdParams params{fa_wgmma_head_map(backend_, type_, q, bh, p.n_q, head_dim_, bm),
                                       fa_wgmma_head_map(backend_, type_, k, bh, p.n_k, head_dim_, kBlockN),
                                       fa_wgmma_head_map(backend_, type_, v, bh, p.n_k, head_dim_, kBlockN),
                                       fa_wgmma_head_map(backend_, type_, d_o, bh, p.n_q, head_dim_, bm),
                                       lse,
                                       delta,
                                       dk,
                                       dv,
                                       dq_acc,
                                       p.n_q,
                                       p.n_k,
                                       p.scale};
  const LaunchConfig cfg{{unsigned((p.n_k + kBlockN - 1) / kBlockN), unsigned(bh), 1},
                         {384, 1, 1},
                         shared_bytes(head_dim_, fused_dq)};
  backend_.launch(kernel, cfg, kernel_params(params));
}

}  // namespace lab
