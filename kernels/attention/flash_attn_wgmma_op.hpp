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

// Empty when the kernel supports this HEAD_DIM, else the rule (the `wgmma` variant's problem text).
std::string fa_wgmma_head_dim_problem(int head_dim);
// The one kernel for an element type, HEAD_DIM (64, 128 or 256; anything else throws UsageError) and
// schedule.
CompileRequest fa_wgmma_compile_request(HalfType type, int head_dim, WgmmaSchedule schedule);
// The same for each schedule, with the signature of the runner's compile hooks.
CompileRequest fa_wgmma_compile_request(HalfType type, int head_dim);  // serial
CompileRequest fa_wgmma_pipelined_compile_request(HalfType type, int head_dim);
// A [BH, rows, head_dim] 16-bit array at `base` as the 3-D map the Hopper kernels read, in boxes of 64
// elements x box_rows rows, 128-byte swizzled: rows past `rows` of a head load as zeros, not the next head's.
TensorMap fa_wgmma_head_map(Backend& backend, HalfType type, const uint16_t* base, int bh, int rows,
                            int head_dim, int box_rows);

class FlashAttnWgmmaOp {
 public:
  FlashAttnWgmmaOp(Backend& backend, HalfType type, int head_dim,
                   WgmmaSchedule schedule = WgmmaSchedule::serial);
  // O (16-bit) and L (float) from Q, K, V (16-bit), each a dense [BH, N, HEAD_DIM] / [BH, N_CTX_Q] array.
  void forward(const uint16_t* q, const uint16_t* k, const uint16_t* v, uint16_t* o, float* lse,
               const AttentionProblem& p) const;

 private:
  Backend& backend_;
  HalfType type_;
  int head_dim_;
  WgmmaSchedule schedule_;
  std::shared_ptr<Module> module_;
  Kernel fwd_;
};

}  // namespace lab
