// FlashAttn2Op: the Flash Attention 2 kernels (flash_attn2.cu) of one variant and HEAD_DIM, compiled once and
// launched on raw device pointers (PSA runs them on slices of a packed buffer). Layouts as in flash_attn2.cu.
#pragma once
#include <memory>
#include <string>

#include "nvrtc_runtime/backend.hpp"

namespace lab {

inline constexpr const char* kFlashAttn2Source = "attention/flash_attn2.cu";

// Rows per CTA of the tiled kernels (16, 32 or 64; ignored by row_per_cta).
struct Fa2Blocks {
  int fwd = 64;
  int dq = 64;
  int dkdv = 32;
};

// Picks BLOCK_M so that a problem yields enough CTAs for an H200 (132 SMs): the largest block that still
// gives two CTAs per SM, else 16; dK/dV stays at 32 or less from HEAD_DIM 64 on (two accumulators in
// registers). At HEAD_DIM 256 the forward and dQ stay at 32 and dK/dV at 16, the largest blocks ptxas fits in
// 255 registers without spilling (sm_90: forward 255 and dQ 254 at 32, dK/dV 213 at 16; BLOCK_M 64 spills).
Fa2Blocks choose_fa2_blocks(int batch_heads, int n_q, int n_k, int head_dim);
// Every kernel of a variant at these blocks, as name expressions ("flash_attn2_fwd_tiled<64, 64>", ...):
// forward, backward preprocess, dQ, dK/dV, probs.
CompileRequest fa2_compile_request(const std::string& variant, int head_dim, const Fa2Blocks& blocks);

struct AttentionProblem {
  int batch_heads = 1;
  int n_q = 1;
  int n_k = 1;
  float scale = 1;
};

class FlashAttn2Op {
 public:
  FlashAttn2Op(Backend& backend, std::string variant, int head_dim, Fa2Blocks blocks);
  // O and L from Q, K, V.
  void forward(const float* q, const float* k, const float* v, float* o, float* lse,
               const AttentionProblem& p) const;
  // Floats of scratch the backward needs: D (BH * Nq).
  size_t backward_scratch_floats(const AttentionProblem& p) const { return size_t(p.batch_heads) * p.n_q; }
  // delta = rowsum(dO * O) (scratch of BH * Nq floats, left holding D), then dQ, then dK and dV.
  void backward(const float* q, const float* k, const float* v, const float* o, const float* d_o,
                const float* lse, float* delta, float* dq, float* dk, float* dv,
                const AttentionProblem& p) const;
  // The backward's three kernels, each alone: delta = rowsum(dO * O) (BH * Nq floats); dQ from L and D;
  // dK and dV from L and D.
  void backward_preprocess(const float* o, const float* d_o, float* delta, const AttentionProblem& p) const;
  void backward_dq(const float* q, const float* k, const float* v, const float* d_o, const float* lse,
                   const float* delta, float* dq, const AttentionProblem& p) const;
  void backward_dkdv(const float* q, const float* k, const float* v, const float* d_o, const float* lse,
                     const float* delta, float* dk, float* dv, const AttentionProblem& p) const;
  // probs [n_rows, Nk] of head `head` for the query rows `rows` (device int array).
  void probs(const float* q, const float* k, const float* lse, const int* rows, int n_rows, int head,
             const AttentionProblem& p, float* out) const;

 private:
  Backend& backend_;
  bool tiled_;
  int head_dim_;
  Fa2Blocks blocks_;
  std::shared_ptr<Module> module_;
  Kernel fwd_, preprocess_, dq_, dkdv_, probs_;
};

}  // namespace lab
