// FlashAttnWgmmaOp: the Hopper forward (TMA + mbarrier pipeline, warp-specialised wgmma; sm_90a on cuda, the
// emulator's models on cpu) in one of its two consumer schedules, compiled for an element type and HEAD_DIM
// and launched on raw device pointers with the layouts of flash_attn2_mma.cu. The variants `wgmma`
// (flash_attn_wgmma.cu) and `wgmma_pipelined` (flash_attn_wgmma_pipelined.cu) of flash_attn2_fwd_half.
#pragma once
#include <cstdint>
#include <memory>
#include <string>

#include "kernels/attention/flash_attn2_op.hpp"
#include "kernels/common/half_type.hpp"
#include "nvrtc_runtime/backend.hpp"

namespace lab {

inline constexpr const char* kFlashAttnWgmmaSource = "attention/flash_attn_wgmma.cu";
inline constexpr const char* kFlashAttnWgmmaPipelinedSource = "attention/flash_attn_wgmma_pipelined.cu";

// How a consumer warpgroup orders its products: `serial` runs each key tile's S, softmax and P V in turn;
// `pipelined` runs the softmax of tile j while P V of tile j - 1 is on the tensor cores.
enum class WgmmaSchedule { serial, pipelined };

// Keys per tile (the products' N: 64, 128, 176, 192 or 256) and K/V ring depth; 0 / 0 picks the defaults per
// HEAD_DIM (64: 128 x 3, 128: 128 x 2, 256: 64 x 2).
struct WgmmaTiles {
  int bn = 0, stages = 0;
};
// The tiles a WGMMA_TILE choice names: "auto" (the defaults) or "BNxSTAGES", e.g. "176x2".
WgmmaTiles parse_wgmma_tiles(const std::string& choice);

// Empty when the kernel supports this HEAD_DIM, else the rule (the `wgmma` variants' problem text).
std::string fa_wgmma_head_dim_problem(int head_dim);
// Empty when the tiles' Q block, K and V rings and mbarriers fit in a CTA's 227 KB at this HEAD_DIM and their
// accumulators in a consumer's registers, else the rule.
std::string fa_wgmma_tiles_problem(int head_dim, WgmmaTiles tiles, WgmmaSchedule schedule);
// Empty when exp2_fma exponentials of every 8 can run on the FMA pipe (0 to 8, either schedule), else the rule.
std::string fa_wgmma_exp2_fma_problem(int exp2_fma);
// The one kernel for an element type, HEAD_DIM (64, 128 or 256), schedule, tiles and share of exponentials on
// the FMA pipe (a HEAD_DIM, tiles or share the rules refuse throw UsageError).
CompileRequest fa_wgmma_compile_request(HalfType type, int head_dim, WgmmaSchedule schedule, WgmmaTiles tiles,
                                        int exp2_fma = 0);
// The same with the default tiles, for each schedule.
CompileRequest fa_wgmma_compile_request(HalfType type, int head_dim);  // serial
CompileRequest fa_wgmma_pipelined_compile_request(HalfType type, int head_dim);
// A [BH, rows, head_dim] 16-bit array at `base` as the 3-D map the Hopper kernels read, in boxes of 64
// elements x box_rows rows, 128-byte swizzled: rows past `rows` of a head load as zeros, not the next head's.
TensorMap fa_wgmma_head_map(Backend& backend, HalfType type, const uint16_t* base, int bh, int rows,
                            int head_dim, int box_rows);

class FlashAttnWgmmaOp {
 public:
  // persistent: the pipelined schedule's grid of at most one CTA an SM, each walking query blocks, instead of
  // one CTA a block (the serial schedule's consumers run one block: it ignores the flag).
  FlashAttnWgmmaOp(Backend& backend, HalfType type, int head_dim,
                   WgmmaSchedule schedule = WgmmaSchedule::serial, WgmmaTiles tiles = {}, int exp2_fma = 0,
                   bool persistent = false);
  // O (16-bit) and L (float) from Q, K, V (16-bit), each a dense [BH, N, HEAD_DIM] / [BH, N_CTX_Q] array.
  void forward(const uint16_t* q, const uint16_t* k, const uint16_t* v, uint16_t* o, float* lse,
               const AttentionProblem& p) const;

 private:
  Backend& backend_;
  HalfType type_;
  int head_dim_;
  WgmmaSchedule schedule_;
  WgmmaTiles tiles_;  // resolved: never 0
  bool persistent_;
  std::shared_ptr<Module> module_;
  Kernel fwd_;
};

}  // namespace lab
