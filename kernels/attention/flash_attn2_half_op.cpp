// FlashAttn2HalfOp: tile shapes, name expressions, launch shapes and shared-memory sizes of the
// flash_attn2_mma.cu kernels.
#include "kernels/attention/flash_attn2_half_op.hpp"

#include <algorithm>
#include <cstdio>

#include "nvrtc_runtime/errors.hpp"

namespace lab {
namespace {

size_t tile_bytes(int rows, int head_dim) {
  return size_t(rows) * (head_dim + 8) * 2;  // fa2h::stride, 16-bit elements
}

unsigned ceil_div(int a, int b) {
  return unsigned((a + b - 1) / b);
}

struct Names {
  std::string fwd, preprocess, dq, dkdv;  // dq: the dQ kernel, or with fused_dq the accumulator's conversion
};

// "kernel<args>" from its comma-separated template arguments.
std::string expr(const char* kernel, const std::initializer_list<std::string>& args) {
  std::string e = std::string(kernel) + "<";
  for (const std::string& a : args) e += (e.back() == '<' ? "" : ", ") + a;
  return e + ">";
}

Names names(HalfType type, int d, const Fa2MmaConfig& c) {
  const std::string dt = half_type_template_arg(type);
  const std::string hd = std::to_string(d);
  auto n = [](int v) { return std::to_string(v); };
  return {expr("flash_attn2_fwd_mma", {dt, hd, n(c.fwd.warps), n(c.fwd.mt), n(c.fwd.step)}),
          expr("flash_attn2_bwd_preprocess_mma", {dt, hd}),
          c.fused_dq ? expr("flash_attn2_bwd_dq_convert_mma", {dt})
                     : expr("flash_attn2_bwd_dq_mma", {dt, hd, n(c.dq.warps), n(c.dq.mt), n(c.dq.step)}),
          expr("flash_attn2_bwd_dkdv_mma",
               {dt, hd, n(c.dkdv.warps), n(c.dkdv.step), c.fused_dq ? "true" : "false"})};
}

}  // namespace

// Picked by bench/fa2_half_sweep.sh on an H200 (BH 64, N 1024, f16; docs/PERFORMANCE.md). Two m-tiles per
// warp in the forward double the products per K / V fragment read (4x2x64: +9 % at HEAD_DIM 64, +14 % at 128
// over 4x1x64; at 128 that is 255 registers, without spills). dK/dV holds two HEAD_DIM-wide accumulators per
// warp: at HEAD_DIM 128 its query tile shrinks to 32 so the score and dP tiles still fit in registers; at 64,
// eight warps sharing each Q / dO tile were 10 % faster than four.
Fa2MmaConfig default_fa2_mma_config(int head_dim) {
  if (head_dim != 32 && head_dim != 64 && head_dim != 128)
    throw UsageError("flash attention fp16/bf16: HEAD_DIM " + std::to_string(head_dim) +
                     " is not supported (32, 64, 128)");
  if (head_dim == 128) return {{4, 2, 64}, {4, 1, 64}, {4, 1, 32}};
  return {{4, 2, 64}, {4, 1, 64}, {head_dim == 64 ? 8 : 4, 1, 64}};
}

Fa2MmaTiles parse_fa2_mma_tiles(const std::string& text, const std::string& what, bool dkdv) {
  Fa2MmaTiles t;
  char x1 = 0, x2 = 0;
  int used = 0;
  const bool parsed =
      std::sscanf(text.c_str(), "%d%c%d%c%d%n", &t.warps, &x1, &t.mt, &x2, &t.step, &used) == 5 &&
      x1 == 'x' && x2 == 'x' && size_t(used) == text.size();
  const bool valid = parsed && (t.warps == 2 || t.warps == 4 || t.warps == 8) &&
                     (t.mt == 1 || (t.mt == 2 && !dkdv)) && (t.step == 32 || t.step == 64 || t.step == 128);
  if (!valid)
    throw UsageError(what + "=" + text + " is invalid: expected WARPSxMTxSTEP with WARPS 2, 4 or 8, MT " +
                     (dkdv ? "1" : "1 or 2") + ", STEP 32, 64 or 128 (e.g. 4x1x64)");
  return t;
}

// The fused dK/dV kernel splits the BM x HEAD_DIM dQ tile over its warps in 16-row, 16k-column slices.
void check_fused_dq(const Fa2MmaConfig& c, int head_dim) {
  const int m_tiles = c.dkdv.step / 16;
  if (c.dkdv.warps % m_tiles != 0 || head_dim * m_tiles / c.dkdv.warps % 16 != 0)
    throw UsageError(
        "fused dQ: DKDV_TILE " + std::to_string(c.dkdv.warps) + "x1x" + std::to_string(c.dkdv.step) +
        " cannot split a " + std::to_string(c.dkdv.step) + " x " + std::to_string(head_dim) +
        " dQ tile over its warps (WARPS must be a multiple of STEP / 16, each slice 16k columns)");
}

CompileRequest fa2_half_compile_request(HalfType type, int head_dim, const Fa2MmaConfig& config) {
  if (config.fused_dq) check_fused_dq(config, head_dim);
  const Names n = names(type, head_dim, config);
  return {kFlashAttn2MmaSource, {}, {n.fwd, n.preprocess, n.dq, n.dkdv}};
}

FlashAttn2HalfOp::FlashAttn2HalfOp(Backend& backend, HalfType type, int head_dim, const Fa2MmaConfig& config)
    : backend_(backend), type_(type), head_dim_(head_dim), config_(config) {
  module_ = backend.compile(fa2_half_compile_request(type_, head_dim_, config_));
  const Names n = names(type_, head_dim_, config_);
  fwd_ = module_->kernel(n.fwd);
  preprocess_ = module_->kernel(n.preprocess);
  dq_ = module_->kernel(n.dq);
  dkdv_ = module_->kernel(n.dkdv);
}

void FlashAttn2HalfOp::forward(const uint16_t* q, const uint16_t* k, const uint16_t* v, uint16_t* o,
                               float* lse, const AttentionProblem& p) const {
  const Fa2MmaTiles& t = config_.fwd;
  int n_q = p.n_q, n_k = p.n_k;
  float scale = p.scale;
  LaunchConfig cfg;
  cfg.block = {unsigned(32 * t.warps), 1, 1};
  cfg.grid = {ceil_div(n_q, t.block()), unsigned(p.batch_heads), 1};
  cfg.dynamic_shared_bytes = tile_bytes(t.block() + 4 * t.step, head_dim_);
  backend_.launch(fwd_, cfg, kernel_args(q, k, v, o, lse, n_q, n_k, scale));
}

size_t FlashAttn2HalfOp::backward_scratch_floats(const AttentionProblem& p) const {
  const size_t rows = size_t(p.batch_heads) * p.n_q;
  return rows + (config_.fused_dq ? rows * head_dim_ : 0);
}

void FlashAttn2HalfOp::backward(const uint16_t* q, const uint16_t* k, const uint16_t* v, const uint16_t* o,
                                const uint16_t* d_o, const float* lse, float* scratch, uint16_t* dq,
                                uint16_t* dk, uint16_t* dv, const AttentionProblem& p) const {
  float* delta = scratch;
  const Fa2MmaConfig& c = config_;
  int n_q = p.n_q, n_k = p.n_k, rows = p.batch_heads * p.n_q;
  float scale = p.scale;
  LaunchConfig pre;
  pre.block = {128, 1, 1};
  pre.grid = {ceil_div(rows, 128 / (head_dim_ / 8)), 1, 1};
  backend_.launch(preprocess_, pre, kernel_args(o, d_o, delta, rows));

  const float* delta_in = delta;
  float* dq_acc = c.fused_dq ? scratch + rows : nullptr;
  if (!c.fused_dq) {
    LaunchConfig cq;
    cq.block = {unsigned(32 * c.dq.warps), 1, 1};
    cq.grid = {ceil_div(n_q, c.dq.block()), unsigned(p.batch_heads), 1};
    cq.dynamic_shared_bytes = tile_bytes(2 * c.dq.block() + 4 * c.dq.step, head_dim_);
    backend_.launch(dq_, cq, kernel_args(q, k, v, d_o, lse, delta_in, dq, n_q, n_k, scale));
  } else {
    backend_.fill_bytes(dq_acc, 0, sizeof(float) * size_t(rows) * head_dim_);
  }

  LaunchConfig ckv;
  ckv.block = {unsigned(32 * c.dkdv.warps), 1, 1};
  ckv.grid = {ceil_div(n_k, c.dkdv.block()), unsigned(p.batch_heads), 1};
  ckv.dynamic_shared_bytes =
      tile_bytes(2 * c.dkdv.block() + 4 * c.dkdv.step, head_dim_) + 4 * sizeof(float) * c.dkdv.step;
  if (c.fused_dq) ckv.dynamic_shared_bytes += size_t(c.dkdv.block()) * (c.dkdv.step + 8) * 2;  // dS^T tile
  backend_.launch(dkdv_, ckv, kernel_args(q, k, v, d_o, lse, delta_in, dk, dv, dq_acc, n_q, n_k, scale));

  if (c.fused_dq) {
    int count = rows * head_dim_;
    const float* acc_in = dq_acc;
    LaunchConfig conv;
    conv.block = {256, 1, 1};
    conv.grid = {std::min(ceil_div(count / 2, 256), 132u * 8), 1, 1};
    backend_.launch(dq_, conv, kernel_args(acc_in, dq, count, scale));
  }
}

}  // namespace lab
