// FlashAttn2Op: name expressions, launch shapes and shared-memory sizes of the flash_attn2.cu kernels.
#include "kernels/attention/flash_attn2_op.hpp"

#include "nvrtc_runtime/errors.hpp"

namespace lab {
namespace {

constexpr unsigned kThreads = 128;  // every kernel of flash_attn2.cu

// Host copies of the shared-memory formulas at the end of flash_attn2.cu's helpers.
int block_n(int d) {
  return d == 128 ? 32 : 64;
}
size_t fwd_smem(int d, int m) {
  const int bn = block_n(d);
  return sizeof(float) * ((m + bn) * (d + 4) + bn * d + m * (bn + 16));
}
size_t dq_smem(int d, int m) {
  const int bn = block_n(d);
  return sizeof(float) * (2 * (m + bn) * (d + 4) + m * (bn + 16));
}
size_t dkdv_smem(int d, int m) {
  const int bn = block_n(d);
  return sizeof(float) * (2 * (m + bn) * (d + 4) + 2 * bn + 2 * m * (bn + 16));
}

unsigned ceil_div(int a, int b) {
  return unsigned((a + b - 1) / b);
}

std::string expr(const std::string& kernel, const std::string& variant, int d, int block = 0) {
  std::string e = kernel + "_" + variant + "<" + std::to_string(d);
  if (block) e += ", " + std::to_string(block);
  return e + ">";
}

struct Names {
  std::string fwd, preprocess, dq, dkdv, probs;
};

Names names(const std::string& variant, int d, const Fa2Blocks& b) {
  if (variant == "tiled")
    return {expr("flash_attn2_fwd", variant, d, b.fwd), expr("flash_attn2_bwd_preprocess", variant, d),
            expr("flash_attn2_bwd_dq", variant, d, b.dq), expr("flash_attn2_bwd_dkdv", variant, d, b.dkdv),
            expr("attn_probs", variant, d)};
  if (variant == "row_per_cta")
    return {expr("flash_attn2_fwd", variant, d), expr("flash_attn2_bwd_preprocess", variant, d),
            expr("flash_attn2_bwd_dq", variant, d), expr("flash_attn2_bwd_dkdv", variant, d),
            expr("attn_probs", variant, d)};
  throw UsageError("unknown flash attention variant '" + variant + "' (valid: tiled, row_per_cta)");
}

int pick(int batch_heads, int rows, int largest) {
  constexpr int kTargetCtas = 2 * 132;
  for (int m = largest; m > 16; m /= 2)
    if (int64_t(batch_heads) * ((rows + m - 1) / m) >= kTargetCtas) return m;
  return 16;
}

}  // namespace

Fa2Blocks choose_fa2_blocks(int batch_heads, int n_q, int n_k, int head_dim) {
  return {pick(batch_heads, n_q, 64), pick(batch_heads, n_q, 64),
          pick(batch_heads, n_k, head_dim >= 64 ? 32 : 64)};
}

CompileRequest fa2_compile_request(const std::string& variant, int head_dim, const Fa2Blocks& blocks) {
  const Names n = names(variant, head_dim, blocks);
  return {kFlashAttn2Source, {}, {n.fwd, n.preprocess, n.dq, n.dkdv, n.probs}};
}

FlashAttn2Op::FlashAttn2Op(Backend& backend, std::string variant, int head_dim, Fa2Blocks blocks)
    : backend_(backend), variant_(std::move(variant)), head_dim_(head_dim), blocks_(blocks) {
  module_ = backend.compile(fa2_compile_request(variant_, head_dim_, blocks_));
  const Names n = names(variant_, head_dim_, blocks_);
  fwd_ = module_->kernel(n.fwd);
  preprocess_ = module_->kernel(n.preprocess);
  dq_ = module_->kernel(n.dq);
  dkdv_ = module_->kernel(n.dkdv);
  probs_ = module_->kernel(n.probs);
}

void FlashAttn2Op::forward(const float* q, const float* k, const float* v, float* o, float* lse,
                           const AttentionProblem& p) const {
  int n_q = p.n_q, n_k = p.n_k;
  float scale = p.scale;
  LaunchConfig cfg;
  cfg.block = {kThreads, 1, 1};
  if (tiled()) {
    cfg.grid = {ceil_div(n_q, blocks_.fwd), unsigned(p.batch_heads), 1};
    cfg.dynamic_shared_bytes = fwd_smem(head_dim_, blocks_.fwd);
  } else {
    cfg.grid = {unsigned(n_q), unsigned(p.batch_heads), 1};
  }
  backend_.launch(fwd_, cfg, kernel_args(q, k, v, o, lse, n_q, n_k, scale));
}

void FlashAttn2Op::backward(const float* q, const float* k, const float* v, const float* o, const float* d_o,
                            const float* lse, float* delta, float* dq, float* dk, float* dv,
                            const AttentionProblem& p) const {
  int n_q = p.n_q, n_k = p.n_k, rows = p.batch_heads * p.n_q;
  float scale = p.scale;
  LaunchConfig pre;
  if (tiled()) {
    const int rows_per_block = int(kThreads) / (head_dim_ / 4);
    pre.grid = {ceil_div(rows, rows_per_block), 1, 1};
    pre.block = {kThreads, 1, 1};
  } else {
    pre.grid = {unsigned(rows), 1, 1};
    pre.block = {32, 1, 1};
  }
  backend_.launch(preprocess_, pre, kernel_args(o, d_o, delta, rows));

  const float* delta_in = delta;
  LaunchConfig cq, ckv;
  cq.block = ckv.block = {kThreads, 1, 1};
  if (tiled()) {
    cq.grid = {ceil_div(n_q, blocks_.dq), unsigned(p.batch_heads), 1};
    cq.dynamic_shared_bytes = dq_smem(head_dim_, blocks_.dq);
    ckv.grid = {ceil_div(n_k, blocks_.dkdv), unsigned(p.batch_heads), 1};
    ckv.dynamic_shared_bytes = dkdv_smem(head_dim_, blocks_.dkdv);
  } else {
    cq.grid = {unsigned(n_q), unsigned(p.batch_heads), 1};
    ckv.grid = {unsigned(n_k), unsigned(p.batch_heads), 1};
  }
  backend_.launch(dq_, cq, kernel_args(q, k, v, d_o, lse, delta_in, dq, n_q, n_k, scale));
  backend_.launch(dkdv_, ckv, kernel_args(q, k, v, d_o, lse, delta_in, dk, dv, n_q, n_k, scale));
}

void FlashAttn2Op::probs(const float* q, const float* k, const float* lse, const int* rows, int n_rows,
                         int head, const AttentionProblem& p, float* out) const {
  int n_q = p.n_q, n_k = p.n_k;
  float scale = p.scale;
  LaunchConfig cfg;
  cfg.block = {kThreads, 1, 1};
  cfg.grid = tiled() ? Dim3{ceil_div(n_k, 64), ceil_div(n_rows, 16), 1} : Dim3{unsigned(n_rows), 1, 1};
  backend_.launch(probs_, cfg, kernel_args(q, k, lse, rows, n_rows, head, n_q, n_k, scale, out));
}

}  // namespace lab
