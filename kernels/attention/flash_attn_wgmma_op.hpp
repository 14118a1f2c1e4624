// FlashAttnWgmmaOp: the Hopper forward of flash_attn_wgmma.cu (TMA + mbarrier pipeline, warp-specialised
// wgmma; sm_90a on cuda, the emulator's models on cpu) compiled for an element type and HEAD_DIM and launched
// on raw device pointers with the layouts of flash_attn2_mma.cu. The variant `wgmma` of flash_attn2_fwd_half.
#pragma once
#include <cstdint>
#include <memory>
#include <string>

#include "kernels/attention/flash_attn2_op.hpp"
#include "kernels/common/half_type.hpp"
#include "nvrtc_runtime/backend.hpp"

namespace lab {

inline constexpr const char* kFlashAttnWgmmaSource = "attention/flash_attn_wgmma.cu";

// Empty when the kernel supports this HEAD_DIM, else the rule (the `wgmma` variant's problem text).
std::string fa_wgmma_head_dim_problem(int head_dim);
// The one kernel for an element type and HEAD_DIM (64, 128 or 256; anything else throws UsageError).
CompileRequest fa_wgmma_compile_request(HalfType type, int head_dim);
// A [BH, rows, head_dim] 16-bit array at `base` as the 3-D map the Hopper kernels read, in boxes of 64
// elements x box_rows rows, 128-byte swizzled: rows past `rows` of a head load as zeros, not the next head's.
TensorMap fa_wgmma_head_map(Backend& backend, HalfType type, const uint16_t* base, int bh, int rows,
                            int head_dim, int box_rows);

class FlashAttnWgmmaOp {
 public:
  FlashAttnWgmmaOp(Backend& backend, HalfType type, int head_dim);
  // O (16-bit) and L (float) from Q, K, V (16-bit), each a dense [BH, N, HEAD_DIM] / [BH, N_CTX_Q] array.
  void forward(const uint16_t* q, const uint16_t* k, const uint16_t* v, uint16_t* o, float* lse,
               const AttentionProblem& p) const;

 private:
  Backend& backend_;
  HalfType type_;
  int head_dim_;
  std::shared_ptr<Module> module_;
  Kernel fwd_;
};

}  // namespace lab
