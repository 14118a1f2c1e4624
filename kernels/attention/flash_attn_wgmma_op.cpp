// FlashAttnWgmmaOp: the tile configuration per HEAD_DIM and schedule, the tensor maps of Q, K and V, and the
// launch of flash_attn_wgmma_fwd or flash_attn_wgmma_fwd_pipelined.
#include "kernels/attention/flash_attn_wgmma_op.hpp"

#include <algorithm>
#include <sstream>

#include "kernels/attention/flash_attn_wgmma_params.cuh"
#include "nvrtc_runtime/errors.hpp"
#include "nvrtc_runtime/tensor_map.hpp"

namespace lab {
namespace {

constexpr int kBlockM = 128;  // query rows per CTA (two consumer warpgroups)
constexpr int kColumns = 64;  // elements per 128-byte swizzled row: the maps' inner box

// The default keys per tile and pipeline depth: the largest tiles whose Q block and STAGES K and V tiles fit
// in the 227 KB a CTA may have, with the score accumulators (BN / 2 floats a thread) beside the output
// (HEAD_DIM / 2) in the consumers' 240 registers (the pipelined schedule also holds the previous tile's P,
// BN / 4 registers). At HEAD_DIM 64 the serial schedule takes 256 x 3 (H200, fourteenth session: 459 / 463
// TFLOP/s fp16 / bf16 against 428 / 433 with 128 x 3; the wider tile halves the mbarrier waits and softmax
// reductions per key), which the pipelined schedule cannot hold (224 registers).
WgmmaTiles resolved(int head_dim, WgmmaTiles t, WgmmaSchedule schedule) {
  if (t.bn != 0) return t;
  if (head_dim == 64) return schedule == WgmmaSchedule::serial ? WgmmaTiles{256, 3} : WgmmaTiles{128, 3};
  if (head_dim == 128) return {128, 2};
  return {64, 2};
}

// The kernel's Smem: Q, the K and V rings, the mbarriers (Q's full and empty; K and V of a stage released on
// separate ones in the pipelined schedule), + alignment slack.
size_t shared_bytes(int head_dim, const WgmmaTiles& t, WgmmaSchedule schedule) {
  const size_t q = size_t(kBlockM) * head_dim * 2, tile = size_t(t.bn) * head_dim * 2;
  const int barriers_per_stage = schedule == WgmmaSchedule::pipelined ? 4 : 3;
  return q + 2 * t.stages * tile + (2 + barriers_per_stage * t.stages) * 8 + 1024;
}

// Resolved tiles for a kernel the rules accept, else UsageError.
WgmmaTiles checked_tiles(int head_dim, WgmmaTiles t, WgmmaSchedule schedule) {
  std::string problem = fa_wgmma_head_dim_problem(head_dim);
  if (problem.empty()) problem = fa_wgmma_tiles_problem(head_dim, t, schedule);
  if (!problem.empty()) throw UsageError("flash attention " + problem);
  return resolved(head_dim, t, schedule);
}

}  // namespace

TensorMap fa_wgmma_head_map(Backend& backend, HalfType type, const uint16_t* base, int bh, int rows,
                            int head_dim, int box_rows) {
  const DeviceBuffer view =
      DeviceBuffer::borrow(const_cast<uint16_t*>(base), size_t(bh) * rows * head_dim * 2);
  TensorMapDesc d = dense_tensor_map(type == HalfType::f16 ? TensorElement::F16 : TensorElement::BF16, view,
                                     {uint64_t(head_dim), uint64_t(rows), uint64_t(bh)},
                                     {uint32_t(kColumns), uint32_t(box_rows), 1});
  d.swizzle = TensorSwizzle::B128;
  d.l2_promotion = TensorL2Promotion::B256;
  return backend.tensor_map(d);
}

WgmmaTiles parse_wgmma_tiles(const std::string& choice) {
  if (choice == "auto") return {};
  WgmmaTiles t;
  char x = 0;
  std::istringstream in(choice);
  if (!(in >> t.bn >> x >> t.stages) || x != 'x' || !in.eof() ||
      !(t.bn == 64 || t.bn == 128 || t.bn == 176 || t.bn == 192 || t.bn == 256) || t.stages < 2)
    throw UsageError("WGMMA_TILE: auto or BNxSTAGES with BN 64, 128, 176, 192 or 256 and STAGES >= 2, not '" +
                     choice + "'");
  return t;
}

std::string fa_wgmma_tiles_problem(int head_dim, WgmmaTiles tiles, WgmmaSchedule schedule) {
  constexpr size_t kCtaShared = 227 * 1024;
  // Accumulator registers a consumer thread holds at once: the scores (BN / 2), the output (HEAD_DIM / 2)
  // and, pipelined, the previous tile's P (BN / 4). ptxas (NVRTC 13.0) fits 208 of them in the consumers' 240
  // without spilling (HEAD_DIM 128, 192 x 2 pipelined: up to R231); 224 spill 144 bytes and lose the overlap.
  constexpr int kAccumulatorRegisters = 208;
  const WgmmaTiles t = resolved(head_dim, tiles, schedule);
  const std::string name = "wgmma: WGMMA_TILE " + std::to_string(t.bn) + "x" + std::to_string(t.stages);
  const size_t bytes = shared_bytes(head_dim, t, schedule);
  if (bytes > kCtaShared)
    return name + " needs " + std::to_string(bytes) + " bytes of shared memory at HEAD_DIM " +
           std::to_string(head_dim) + ", over the " + std::to_string(kCtaShared) + " a CTA may have";
  const int registers = t.bn / 2 + head_dim / 2 + (schedule == WgmmaSchedule::pipelined ? t.bn / 4 : 0);
  if (registers > kAccumulatorRegisters)
    return name + " holds " + std::to_string(registers) + " accumulator registers a thread at HEAD_DIM " +
           std::to_string(head_dim) + " (scores, output" +
           (schedule == WgmmaSchedule::pipelined ? ", the previous P" : "") + "), over the " +
           std::to_string(kAccumulatorRegisters) + " that compile without spilling";
  return "";
}

std::string fa_wgmma_head_dim_problem(int head_dim) {
  if (head_dim == 64 || head_dim == 128 || head_dim == 256) return "";
  return "wgmma: HEAD_DIM 64, 128 or 256 (rows of whole 128-byte swizzled column blocks), not " +
         std::to_string(head_dim);
}

std::string fa_wgmma_exp2_fma_problem(int exp2_fma) {
  if (exp2_fma >= 0 && exp2_fma <= 8) return "";
  return "wgmma: EXP2_FMA (exponentials of every 8 on the FMA pipe) 0 to 8, not " + std::to_string(exp2_fma);
}

CompileRequest fa_wgmma_compile_request(HalfType type, int head_dim, WgmmaSchedule schedule, WgmmaTiles tiles,
                                        int exp2_fma) {
  const WgmmaTiles t = checked_tiles(head_dim, tiles, schedule);
  if (const std::string problem = fa_wgmma_exp2_fma_problem(exp2_fma); !problem.empty())
    throw UsageError("flash attention " + problem);
  const bool pipelined = schedule == WgmmaSchedule::pipelined;
  CompileRequest r{
      pipelined ? kFlashAttnWgmmaPipelinedSource : kFlashAttnWgmmaSource,
      {},
      {std::string(pipelined ? "flash_attn_wgmma_fwd_pipelined<" : "flash_attn_wgmma_fwd<") +
       half_type_template_arg(type) + ", " + std::to_string(head_dim) + ", " + std::to_string(t.bn) + ", " +
       std::to_string(t.stages) + ", " + std::to_string(exp2_fma) + ">"}};
  r.arch_specific = true;
  return r;
}

CompileRequest fa_wgmma_compile_request(HalfType type, int head_dim) {
  return fa_wgmma_compile_request(type, head_dim, WgmmaSchedule::serial, {});
}

CompileRequest fa_wgmma_pipelined_compile_request(HalfType type, int head_dim) {
  return fa_wgmma_compile_request(type, head_dim, WgmmaSchedule::pipelined, {});
}

FlashAttnWgmmaOp::FlashAttnWgmmaOp(Backend& backend, HalfType type, int head_dim, WgmmaSchedule schedule,
                                   WgmmaTiles tiles, int exp2_fma, bool persistent)
    : backend_(backend),
      type_(type),
      head_dim_(head_dim),
      schedule_(schedule),
      tiles_(checked_tiles(head_dim, tiles, schedule)),
      persistent_(persistent && schedule == WgmmaSchedule::pipelined) {
  const CompileRequest request = fa_wgmma_compile_request(type, head_dim, schedule, tiles_, exp2_fma);
  module_ = backend.compile(request);
  fwd_ = module_->kernel(request.name_expressions[0]);
}

void FlashAttnWgmmaOp::forward(const uint16_t* q, const uint16_t* k, const uint16_t* v, uint16_t* o,
                               float* lse, const AttentionProblem& p) const {
  const WgmmaTiles& t = tiles_;
  const FlashAttnWgmmaFwdParams params{
      fa_wgmma_head_map(backend_, type_, q, p.batch_heads, p.n_q, head_dim_, kBlockM),
      fa_wgmma_head_map(backend_, type_, k, p.batch_heads, p.n_k, head_dim_, t.bn),
      fa_wgmma_head_map(backend_, type_, v, p.batch_heads, p.n_k, head_dim_, t.bn),
      o,
      lse,
      p.n_q,
      p.n_k,
      p.scale,
      p.batch_heads};
  const unsigned blocks_per_head = unsigned((p.n_q + kBlockM - 1) / kBlockM);
  const Dim3 grid =
      persistent_ ? Dim3{unsigned(std::min<int64_t>(int64_t(blocks_per_head) * p.batch_heads,
                                                    backend_.device().multiprocessors)),
                         1, 1}
                  : Dim3{blocks_per_head, unsigned(p.batch_heads), 1};
  const LaunchConfig cfg{grid, {384, 1, 1}, shared_bytes(head_dim_, t, schedule_)};
  backend_.launch(fwd_, cfg, kernel_params(params));
}

}  // namespace lab
