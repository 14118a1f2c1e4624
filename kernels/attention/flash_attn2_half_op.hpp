// FlashAttn2HalfOp: the half-precision (fp16 / bf16) Flash Attention 2 kernels of flash_attn2_mma.cu —
// tensor-core mma.sync with float accumulation — compiled once for an element type and HEAD_DIM and launched
// on raw device pointers. Layouts as in flash_attn2.cu, with Q, K, V, O, dO, dQ, dK, dV holding 16-bit
// elements (uint16_t patterns) and L, D staying float32.
#pragma once
#include <cstdint>
#include <memory>
#include <string>

#include "kernels/attention/flash_attn2_mma_params.cuh"
#include "kernels/attention/flash_attn2_op.hpp"
#include "kernels/common/half_type.hpp"
#include "kernels/kernel_spec.hpp"
#include "nvrtc_runtime/backend.hpp"

namespace lab {

inline constexpr const char* kFlashAttn2MmaSource = "attention/flash_attn2_mma.cu";

// The tile shape of one kernel: warps per CTA, m-tiles of 16 rows per warp (the CTA's block is
// 16 * mt * warps rows: queries for the forward and dQ, keys for dK/dV) and the rows of the tile walked per
// step (keys, or queries for dK/dV). Written "WARPSxMTxSTEP", e.g. "4x2x64".
struct Fa2MmaTiles {
  int warps = 4;
  int mt = 1;
  int step = 64;
  int block() const { return 16 * mt * warps; }
};
struct Fa2MmaConfig {
  Fa2MmaTiles fwd, dq, dkdv;
  // The backward's dQ from the dK/dV kernel through float atomics (variant mma_fused_dq) instead of its own
  // kernel (dq unused then); needs backward_scratch_floats() of scratch.
  bool fused_dq = false;
};
// Whether flash_attn2_mma.cu has kernels for this HEAD_DIM: 32, 64, 128 or 256.
bool fa2_half_head_dim_supported(int head_dim);
// The measured default tiles at HEAD_DIM (UsageError for one without kernels), variant "mma".
Fa2MmaConfig fa2_mma_default_config(int head_dim);
// The configuration of a variant ("mma", or "mma_fused_dq": dQ from the dK/dV kernel) at resolved HEAD_DIM
// (32, 64, 128 or 256), FWD_TILE, DQ_TILE and DKDV_TILE: the measured default for HEAD_DIM, each part
// replaced by its *_TILE unless that is auto. A tile is "WARPSxMTxSTEP" (WARPS 2, 4 or 8; MT 1 or 2, 1 for
// dK/dV; STEP 32, 64 or 128); anything else throws UsageError naming the parameter.
Fa2MmaConfig fa2_mma_config(const std::string& variant, const Params& p);

// Every kernel of flash_attn2_mma.cu for one element type, head dimension and tile configuration.
CompileRequest fa2_half_compile_request(HalfType type, int head_dim, const Fa2MmaConfig& config);

// The backward's ends in flash_attn2_mma.cu, for a backward that brings its own dQ / dK/dV kernels
// (FlashAttnWgmmaBackwardOp): the entries of the preprocess and of the float dQ accumulator's conversion, and
// their launches.
std::string fa2_half_preprocess_entry(HalfType type, int head_dim);
std::string fa2_half_dq_convert_entry(HalfType type);
// delta = rowsum(dO * O) over the BH * Nq rows.
void launch_fa2_half_preprocess(Backend& backend, const Kernel& preprocess, int head_dim, const uint16_t* o,
                                const uint16_t* d_o, float* delta, const AttentionProblem& p);
// dq = DT(scale * dq_acc), `count` (even) elements.
void launch_fa2_half_dq_convert(Backend& backend, const Kernel& convert, const float* dq_acc, uint16_t* dq,
                                int count, float scale);

class FlashAttn2HalfOp {
 public:
  FlashAttn2HalfOp(Backend& backend, HalfType type, int head_dim, const Fa2MmaConfig& config);
  // O (16-bit) and L (float) from Q, K, V (16-bit).
  void forward(const uint16_t* q, const uint16_t* k, const uint16_t* v, uint16_t* o, float* lse,
               const AttentionProblem& p) const;
  // Floats of scratch the backward needs: D (BH * Nq), and with fused_dq the dQ accumulator (BH * Nq * D).
  size_t backward_scratch_floats(const AttentionProblem& p) const;
  // delta = rowsum(dO * O) (left in the first BH * Nq floats of `scratch`), then dQ, dK and dV (16-bit).
  void backward(const uint16_t* q, const uint16_t* k, const uint16_t* v, const uint16_t* o,
                const uint16_t* d_o, const float* lse, float* scratch, uint16_t* dq, uint16_t* dk,
                uint16_t* dv, const AttentionProblem& p) const;
  // The backward's kernels each alone, as the split variant runs them (not with fused_dq): delta =
  // rowsum(dO * O) (BH * Nq floats); dQ from L and D; dK and dV from L and D.
  void backward_preprocess(const uint16_t* o, const uint16_t* d_o, float* delta,
                           const AttentionProblem& p) const;
  void backward_dq(const uint16_t* q, const uint16_t* k, const uint16_t* v, const uint16_t* d_o,
                   const float* lse, const float* delta, uint16_t* dq, const AttentionProblem& p) const;
  void backward_dkdv(const uint16_t* q, const uint16_t* k, const uint16_t* v, const uint16_t* d_o,
                     const float* lse, const float* delta, uint16_t* dk, uint16_t* dv,
                     const AttentionProblem& p) const;

 private:
  Backend& backend_;
  int head_dim_;
  Fa2MmaConfig config_;
  std::shared_ptr<Module> module_;
  Kernel fwd_, preprocess_, dq_, dkdv_;

  void launch_dkdv(const FlashAttn2HalfDkdvParams& params, const AttentionProblem& p) const;
};

}  // namespace lab
