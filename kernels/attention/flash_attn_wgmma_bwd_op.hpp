// FlashAttnWgmmaBackwardOp: the Hopper backward of flash_attn_wgmma_bwd.cu (TMA + mbarrier pipeline,
// warp-specialised wgmma, dK / dV in registers, dQ through float vector reductions; sm_90a on cuda, the
// emulator's models on cpu) with flash_attn2_mma.cu's preprocess (D) and dQ conversion, and the Hopper
// forward for O and L. The variant `wgmma` of flash_attn2_bwd_half and flash_attn2_bwd_dkdv_half.
#pragma once
#include <cstdint>
#include <memory>
#include <string>

#include "kernels/attention/flash_attn2_op.hpp"
#include "kernels/attention/flash_attn_wgmma_op.hpp"
#include "kernels/common/half_type.hpp"
#include "nvrtc_runtime/backend.hpp"

namespace lab {

inline constexpr const char* kFlashAttnWgmmaBwdSource = "attention/flash_attn_wgmma_bwd.cu";

// Empty when the backward supports this HEAD_DIM, else the rule (the `wgmma` variant's problem text).
std::string fa_wgmma_bwd_head_dim_problem(int head_dim);
// The backward's two kernels for an element type and HEAD_DIM (64 or 128; anything else throws UsageError):
// with the dQ accumulation, then dK / dV alone.
CompileRequest fa_wgmma_bwd_compile_request(HalfType type, int head_dim);

class FlashAttnWgmmaBackwardOp {
 public:
  FlashAttnWgmmaBackwardOp(Backend& backend, HalfType type, int head_dim);
  // O (16-bit) and L (float) from Q, K, V: the Hopper forward.
  void forward(const uint16_t* q, const uint16_t* k, const uint16_t* v, uint16_t* o, float* lse,
               const AttentionProblem& p) const;
  // Floats of scratch the backward needs: D (BH * Nq), then the dQ accumulator (BH * Nq * HEAD_DIM) from
  // the next 16-byte boundary.
  size_t backward_scratch_floats(const AttentionProblem& p) const;
  // delta = rowsum(dO * O) (left in the first BH * Nq floats of `scratch`), then dQ, dK and dV (16-bit).
  void backward(const uint16_t* q, const uint16_t* k, const uint16_t* v, const uint16_t* o,
                const uint16_t* d_o, const float* lse, float* scratch, uint16_t* dq, uint16_t* dk,
                uint16_t* dv, const AttentionProblem& p) const;
  // delta = rowsum(dO * O) (BH * Nq floats), and the dK/dV kernel alone (no dQ) from L and D.
  void backward_preprocess(const uint16_t* o, const uint16_t* d_o, float* delta,
                           const AttentionProblem& p) const;
  void backward_dkdv(const uint16_t* q, const uint16_t* k, const uint16_t* v, const uint16_t* d_o,
                     const float* lse, const float* delta, uint16_t* dk, uint16_t* dv,
                     const AttentionProblem& p) const;

 private:
  Backend& backend_;
  HalfType type_;
  int head_dim_;
  FlashAttnWgmmaOp forward_;
  std::shared_ptr<Module> module_, ends_module_;
  Kernel fused_, dkdv_, preprocess_, convert_;

  void launch(const Kernel& kernel, bool fused_dq, const uint16_t* q, const uint16_t* k, const uint16_t* v,
              const uint16_t* d_o, const float* lse, const float* delta, uint16_t* dk, uint16_t* dv,
              float* dq_acc, const AttentionProblem& p) const;
};

}  // namespace lab
