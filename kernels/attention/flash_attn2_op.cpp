// FlashAttn2Op: name expressions, launch shapes, shared-memory sizes and parameters of the flash_attn2.cu
// kernels.
#include "kernels/attention/flash_attn2_op.hpp"

#include <algorithm>

#include "kernels/attention/flash_attn2_params.cuh"
#include "nvrtc_runtime/errors.hpp"

namespace lab {
namespace {

constexpr unsigned kThreads = 128;  // every kernel of flash_attn2.cu

// Host copies of the tile sizes and shared-memory formulas of flash_attn2.cu.
int block_n(int d) {
  return d >= 256 ? 16 : d == 128 ? 32 : 64;
}
int probs_block_n(int d) {
  return d >= 256 ? 16 : 64;
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

// 128 threads over `rows` rows of every head: a CTA per block of `block` rows with `smem` bytes of shared
// memory (tiled), or per row (row_per_cta).
LaunchConfig over_rows(bool tiled, int rows, int batch_heads, int block, size_t smem) {
  if (!tiled) return {{unsigned(rows), unsigned(batch_heads), 1}, {kThreads, 1, 1}};
  return {{ceil_div(rows, block), unsigned(batch_heads), 1}, {kThreads, 1, 1}, smem};
}

int pick(int batch_heads, int rows, int largest) {
  constexpr int kTargetCtas = 2 * 132;
  for (int m = largest; m > 16; m /= 2)
    if (int64_t(batch_heads) * ((rows + m - 1) / m) >= kTargetCtas) return m;
  return 16;
}

}  // namespace

Fa2Blocks choose_fa2_blocks(int batch_heads, int n_q, int n_k, int head_dim) {
  const int rows_largest = head_dim >= 256 ? 32 : 64;
  const int keys_largest = head_dim >= 256 ? 16 : head_dim >= 64 ? 32 : 64;
  return {pick(batch_heads, n_q, rows_largest), pick(batch_heads, n_q, rows_largest),
          pick(batch_heads, n_k, keys_largest)};
}

CompileRequest fa2_compile_request(const std::string& variant, int head_dim, const Fa2Blocks& blocks) {
  if (variant != "tiled" && variant != "row_per_cta")
    throw UsageError("unknown flash attention variant '" + variant + "' (valid: tiled, row_per_cta)");
  // "kernel_variant<HEAD_DIM>", with BLOCK_M after it where the tiled kernel takes one.
  auto expr = [&](const char* kernel, int block) {
    const std::string m = variant == "tiled" && block ? ", " + std::to_string(block) : "";
    return std::string(kernel) + "_" + variant + "<" + std::to_string(head_dim) + m + ">";
  };
  return {kFlashAttn2Source,
          {},
          {expr("flash_attn2_fwd", blocks.fwd), expr("flash_attn2_bwd_preprocess", 0),
           expr("flash_attn2_bwd_dq", blocks.dq), expr("flash_attn2_bwd_dkdv", blocks.dkdv),
           expr("attn_probs", 0)}};
}

FlashAttn2Op::FlashAttn2Op(Backend& backend, std::string variant, int head_dim, Fa2Blocks blocks)
    : backend_(backend), tiled_(variant == "tiled"), head_dim_(head_dim), blocks_(blocks) {
  const CompileRequest request = fa2_compile_request(variant, head_dim, blocks);
  module_ = backend.compile(request);
  const std::vector<std::string>& entry = request.name_expressions;
  fwd_ = module_->kernel(entry[0]), preprocess_ = module_->kernel(entry[1]), dq_ = module_->kernel(entry[2]);
  dkdv_ = module_->kernel(entry[3]), probs_ = module_->kernel(entry[4]);
}

void FlashAttn2Op::forward(const float* q, const float* k, const float* v, float* o, float* lse,
                           const AttentionProblem& p) const {
  backend_.launch(fwd_,
                  over_rows(tiled_, p.n_q, p.batch_heads, blocks_.fwd, fwd_smem(head_dim_, blocks_.fwd)),
                  kernel_params(FlashAttn2FwdParams{q, k, v, o, lse, p.n_q, p.n_k, p.scale}));
}

void FlashAttn2Op::backward(const float* q, const float* k, const float* v, const float* o, const float* d_o,
                            const float* lse, float* delta, float* dq, float* dk, float* dv,
                            const AttentionProblem& p) const {
  backward_preprocess(o, d_o, delta, p);
  backward_dq(q, k, v, d_o, lse, delta, dq, p);
  backward_dkdv(q, k, v, d_o, lse, delta, dk, dv, p);
}

void FlashAttn2Op::backward_preprocess(const float* o, const float* d_o, float* delta,
                                       const AttentionProblem& p) const {
  const int rows = p.batch_heads * p.n_q;
  const LaunchConfig pre =
      tiled_ ? LaunchConfig{{ceil_div(rows, int(kThreads) / std::min(head_dim_ / 4, 32)), 1, 1},
                            {kThreads, 1, 1}}
             : LaunchConfig{{unsigned(rows), 1, 1}, {32, 1, 1}};
  backend_.launch(preprocess_, pre, kernel_params(FlashAttn2PreprocessParams{o, d_o, delta, rows}));
}

void FlashAttn2Op::backward_dq(const float* q, const float* k, const float* v, const float* d_o,
                               const float* lse, const float* delta, float* dq,
                               const AttentionProblem& p) const {
  backend_.launch(dq_, over_rows(tiled_, p.n_q, p.batch_heads, blocks_.dq, dq_smem(head_dim_, blocks_.dq)),
                  kernel_params(FlashAttn2DqParams{q, k, v, d_o, lse, delta, dq, p.n_q, p.n_k, p.scale}));
}

void FlashAttn2Op::backward_dkdv(const float* q, const float* k, const float* v, const float* d_o,
                                 const float* lse, const float* delta, float* dk, float* dv,
                                 const AttentionProblem& p) const {
  backend_.launch(
      dkdv_, over_rows(tiled_, p.n_k, p.batch_heads, blocks_.dkdv, dkdv_smem(head_dim_, blocks_.dkdv)),
      kernel_params(FlashAttn2DkdvParams{q, k, v, d_o, lse, delta, dk, dv, p.n_q, p.n_k, p.scale}));
}

void FlashAttn2Op::probs(const float* q, const float* k, const float* lse, const int* rows, int n_rows,
                         int head, const AttentionProblem& p, float* out) const {
  const Dim3 grid = tiled_ ? Dim3{ceil_div(p.n_k, probs_block_n(head_dim_)), ceil_div(n_rows, 16), 1}
                           : Dim3{unsigned(n_rows), 1, 1};
  backend_.launch(probs_, {grid, {kThreads, 1, 1}},
                  kernel_params(AttnProbsParams{q, k, lse, rows, n_rows, head, p.n_q, p.n_k, p.scale, out}));
}

}  // namespace lab
