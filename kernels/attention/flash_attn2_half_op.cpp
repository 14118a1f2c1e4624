// FlashAttn2HalfOp: tile shapes, name expressions, launch shapes, shared-memory sizes and parameters of the
// flash_attn2_mma.cu kernels.
#include "kernels/attention/flash_attn2_half_op.hpp"

#include <algorithm>
#include <cstdio>

#include "kernels/attention/flash_attn2_mma_params.cuh"
#include "nvrtc_runtime/errors.hpp"

namespace lab {
namespace {

size_t tile_bytes(int rows, int head_dim) {
  return size_t(rows) * (head_dim + 8) * 2;  // fa2h::stride, 16-bit elements
}

unsigned ceil_div(int a, int b) {
  return unsigned((a + b - 1) / b);
}

// "kernel<DT, args..., last>" (`last` when given: the dK/dV kernel's FUSED_DQ).
std::string expr(const char* kernel, const std::string& dt, std::initializer_list<int> args,
                 const char* last = nullptr) {
  std::string e = std::string(kernel) + "<" + dt;
  for (int a : args) e += ", " + std::to_string(a);
  return e + (last ? std::string(", ") + last : "") + ">";
}

// "WARPSxMTxSTEP", or UsageError naming `what`.
Fa2MmaTiles parse_tiles(const std::string& text, const std::string& what, bool dkdv) {
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

}  // namespace

// Picked by bench/fa2_half_sweep.sh on an H200 (BH 64, N 1024, f16; docs/PERFORMANCE.md). Two m-tiles per
// warp in the forward double the products per K / V fragment read (4x2x64: +9 % at HEAD_DIM 64, +14 % at 128
// over 4x1x64; at 128 that is 255 registers, without spills). dK/dV holds two HEAD_DIM-wide accumulators per
// warp: at HEAD_DIM 128 its query tile shrinks to 32 so the score and dP tiles still fit in registers; at 64,
// eight warps sharing each Q / dO tile were 10 % faster than four. HEAD_DIM 256 (not swept; ptxas, sm_90):
// one m-tile per warp, the forward at 239 registers and dQ at 241 without spills; dK/dV's two 16 x 256 float
// accumulators alone take 256 registers per thread, so it spills at any tile (736 bytes of stack at 4x1x32).
bool fa2_half_head_dim_supported(int head_dim) {
  return head_dim == 32 || head_dim == 64 || head_dim == 128 || head_dim == 256;
}

Fa2MmaConfig fa2_mma_default_config(int head_dim) {
  if (!fa2_half_head_dim_supported(head_dim))
    throw UsageError("flash attention fp16/bf16: HEAD_DIM " + std::to_string(head_dim) +
                     " is not supported (32, 64, 128, 256)");
  if (head_dim == 256) return {{4, 1, 64}, {4, 1, 32}, {4, 1, 32}};
  if (head_dim == 128) return {{4, 2, 64}, {4, 1, 64}, {4, 1, 32}};
  return {{4, 2, 64}, {4, 1, 64}, {head_dim == 64 ? 8 : 4, 1, 64}};
}

Fa2MmaConfig fa2_mma_config(const std::string& variant, const Params& p) {
  Fa2MmaConfig c = fa2_mma_default_config(int(param_int(p, "HEAD_DIM")));
  c.fused_dq = variant == "mma_fused_dq";
  const struct {
    const char* name;
    Fa2MmaTiles* tiles;
  } overrides[] = {{"FWD_TILE", &c.fwd}, {"DQ_TILE", &c.dq}, {"DKDV_TILE", &c.dkdv}};
  for (const auto& o : overrides)
    if (param_str(p, o.name) != "auto")
      *o.tiles = parse_tiles(param_str(p, o.name), std::string("parameter ") + o.name, o.tiles == &c.dkdv);
  return c;
}

CompileRequest fa2_half_compile_request(HalfType type, int head_dim, const Fa2MmaConfig& c) {
  if (c.fused_dq) check_fused_dq(c, head_dim);
  const std::string dt = half_type_template_arg(type);
  // dq: the dQ kernel, or with fused_dq the accumulator's conversion.
  return {kFlashAttn2MmaSource,
          {},
          {expr("flash_attn2_fwd_mma", dt, {head_dim, c.fwd.warps, c.fwd.mt, c.fwd.step}),
           fa2_half_preprocess_entry(type, head_dim),
           c.fused_dq ? fa2_half_dq_convert_entry(type)
                      : expr("flash_attn2_bwd_dq_mma", dt, {head_dim, c.dq.warps, c.dq.mt, c.dq.step}),
           expr("flash_attn2_bwd_dkdv_mma", dt, {head_dim, c.dkdv.warps, c.dkdv.step},
                c.fused_dq ? "true" : "false")}};
}

std::string fa2_half_preprocess_entry(HalfType type, int head_dim) {
  return expr("flash_attn2_bwd_preprocess_mma", half_type_template_arg(type), {head_dim});
}

std::string fa2_half_dq_convert_entry(HalfType type) {
  return expr("flash_attn2_bwd_dq_convert_mma", half_type_template_arg(type), {});
}

void launch_fa2_half_preprocess(Backend& backend, const Kernel& preprocess, int head_dim, const uint16_t* o,
                                const uint16_t* d_o, float* delta, const AttentionProblem& p) {
  const int rows = p.batch_heads * p.n_q;
  backend.launch(preprocess, {{ceil_div(rows, 128 / (head_dim / 8)), 1, 1}, {128, 1, 1}},
                 kernel_params(FlashAttn2HalfPreprocessParams{o, d_o, delta, rows}));
}

void launch_fa2_half_dq_convert(Backend& backend, const Kernel& convert, const float* dq_acc, uint16_t* dq,
                                int count, float scale) {
  backend.launch(convert, {{std::min(ceil_div(count / 2, 256), 132u * 8), 1, 1}, {256, 1, 1}},
                 kernel_params(FlashAttn2HalfDqConvertParams{dq_acc, dq, count, scale}));
}

FlashAttn2HalfOp::FlashAttn2HalfOp(Backend& backend, HalfType type, int head_dim, const Fa2MmaConfig& config)
    : backend_(backend), head_dim_(head_dim), config_(config) {
  const CompileRequest request = fa2_half_compile_request(type, head_dim, config);
  module_ = backend.compile(request);
  const std::vector<std::string>& entry = request.name_expressions;
  fwd_ = module_->kernel(entry[0]), preprocess_ = module_->kernel(entry[1]);
  dq_ = module_->kernel(entry[2]), dkdv_ = module_->kernel(entry[3]);
}

void FlashAttn2HalfOp::forward(const uint16_t* q, const uint16_t* k, const uint16_t* v, uint16_t* o,
                               float* lse, const AttentionProblem& p) const {
  const Fa2MmaTiles& t = config_.fwd;
  const LaunchConfig cfg{{ceil_div(p.n_q, t.block()), unsigned(p.batch_heads), 1},
                         {unsigned(32 * t.warps), 1, 1},
                         tile_bytes(t.block() + 4 * t.step, head_dim_)};
  backend_.launch(fwd_, cfg, kernel_params(FlashAttn2HalfFwdParams{q, k, v, o, lse, p.n_q, p.n_k, p.scale}));
}

size_t FlashAttn2HalfOp::backward_scratch_floats(const AttentionProblem& p) const {
  const size_t rows = size_t(p.batch_heads) * p.n_q;
  return rows + (config_.fused_dq ? rows * head_dim_ : 0);
}

void FlashAttn2HalfOp::backward(const uint16_t* q, const uint16_t* k, const uint16_t* v, const uint16_t* o,
                                const uint16_t* d_o, const float* lse, float* scratch, uint16_t* dq,
                                uint16_t* dk, uint16_t* dv, const AttentionProblem& p) const {
  float* delta = scratch;
  backward_preprocess(o, d_o, delta, p);
  if (!config_.fused_dq) {
    backward_dq(q, k, v, d_o, lse, delta, dq, p);
    backward_dkdv(q, k, v, d_o, lse, delta, dk, dv, p);
    return;
  }
  const int rows = p.batch_heads * p.n_q, count = rows * head_dim_;
  float* dq_acc = scratch + rows;
  backend_.fill_bytes(dq_acc, 0, sizeof(float) * size_t(count));
  launch_dkdv({q, k, v, d_o, lse, delta, dk, dv, dq_acc, p.n_q, p.n_k, p.scale}, p);
  launch_fa2_half_dq_convert(backend_, dq_, dq_acc, dq, count, p.scale);
}

void FlashAttn2HalfOp::backward_preprocess(const uint16_t* o, const uint16_t* d_o, float* delta,
                                           const AttentionProblem& p) const {
  launch_fa2_half_preprocess(backend_, preprocess_, head_dim_, o, d_o, delta, p);
}

void FlashAttn2HalfOp::backward_dq(const uint16_t* q, const uint16_t* k, const uint16_t* v,
                                   const uint16_t* d_o, const float* lse, const float* delta, uint16_t* dq,
                                   const AttentionProblem& p) const {
  if (config_.fused_dq) throw UsageError("the fused-dQ backward has no dQ kernel of its own");
  const Fa2MmaTiles& t = config_.dq;
  const LaunchConfig cfg{{ceil_div(p.n_q, t.block()), unsigned(p.batch_heads), 1},
                         {unsigned(32 * t.warps), 1, 1},
                         tile_bytes(2 * t.block() + 4 * t.step, head_dim_)};
  backend_.launch(dq_, cfg,
                  kernel_params(FlashAttn2HalfDqParams{q, k, v, d_o, lse, delta, dq, p.n_q, p.n_k, p.scale}));
}

void FlashAttn2HalfOp::backward_dkdv(const uint16_t* q, const uint16_t* k, const uint16_t* v,
                                     const uint16_t* d_o, const float* lse, const float* delta, uint16_t* dk,
                                     uint16_t* dv, const AttentionProblem& p) const {
  if (config_.fused_dq) throw UsageError("the fused-dQ dK/dV kernel needs the backward's dQ accumulator");
  launch_dkdv({q, k, v, d_o, lse, delta, dk, dv, nullptr, p.n_q, p.n_k, p.scale}, p);
}

// The dK/dV kernel's shape; with fused_dq its dS^T tile too.
void FlashAttn2HalfOp::launch_dkdv(const FlashAttn2HalfDkdvParams& params, const AttentionProblem& p) const {
  const Fa2MmaTiles& t = config_.dkdv;
  LaunchConfig cfg{{ceil_div(p.n_k, t.block()), unsigned(p.batch_heads), 1},
                   {unsigned(32 * t.warps), 1, 1},
                   tile_bytes(2 * t.block() + 4 * t.step, head_dim_) + 4 * sizeof(float) * t.step};
  if (config_.fused_dq) cfg.dynamic_shared_bytes += size_t(t.block()) * (t.step + 8) * 2;  // dS^T tile
  backend_.launch(dkdv_, cfg, kernel_params(params));
}

}  // namespace lab
