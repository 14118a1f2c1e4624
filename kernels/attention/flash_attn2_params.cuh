// Parameters of the Flash Attention 2 kernels, shared by the kernels and the host that launches them: plain
// data, passed by value. float32 kernels (flash_attn2.cu), then the fp16 / bf16 ones (flash_attn2_mma.cu),
// whose Q, K, V, O and gradients are 16-bit patterns (uint16_t) and L, D float32. Layouts as in the .cu files.
#pragma once
#if !defined(__CUDACC_RTC__)
#include <cstdint>  // NVRTC has no <cstdint>: common/lab_mma.cuh defines uint16_t there
#endif

namespace lab {

// flash_attn2_fwd_*: O and L from Q, K, V.
struct FlashAttn2FwdParams {
  const float* q;  // [BH, Nq, D]
  const float* k;  // [BH, Nk, D]
  const float* v;  // [BH, Nk, D]
  float* o;        // [BH, Nq, D]
  float* lse;      // [BH, Nq]
  int n_q, n_k;
  float scale;
};

// flash_attn2_bwd_preprocess_*: D = rowsum(dO * O) over `rows` = BH * Nq rows.
struct FlashAttn2PreprocessParams {
  const float* o;
  const float* d_o;
  float* delta;
  int rows;
};

// flash_attn2_bwd_dq_*: dQ from Q, K, V, dO, L and D.
struct FlashAttn2DqParams {
  const float *q, *k, *v, *d_o, *lse, *delta;
  float* dq;
  int n_q, n_k;
  float scale;
};

// flash_attn2_bwd_dkdv_*: dK and dV from Q, K, V, dO, L and D.
struct FlashAttn2DkdvParams {
  const float *q, *k, *v, *d_o, *lse, *delta;
  float *dk, *dv;
  int n_q, n_k;
  float scale;
};

// attn_probs_*: probs [n_rows, Nk] of head `bh` for the query rows `rows`.
struct AttnProbsParams {
  const float *q, *k, *lse;
  const int* rows;
  int n_rows, bh, n_q, n_k;
  float scale;
  float* probs;
};

// flash_attn2_fwd_mma: O (16-bit) and L from Q, K, V (16-bit).
struct FlashAttn2HalfFwdParams {
  const uint16_t *q, *k, *v;
  uint16_t* o;
  float* lse;
  int n_q, n_k;
  float scale;
};

// flash_attn2_bwd_preprocess_mma: D = rowsum(dO * O) over `rows` rows.
struct FlashAttn2HalfPreprocessParams {
  const uint16_t *o, *d_o;
  float* delta;
  int rows;
};

// flash_attn2_bwd_dq_mma: dQ (16-bit).
struct FlashAttn2HalfDqParams {
  const uint16_t *q, *k, *v, *d_o;
  const float *lse, *delta;
  uint16_t* dq;
  int n_q, n_k;
  float scale;
};

// flash_attn2_bwd_dkdv_mma: dK, dV (16-bit); with FUSED_DQ also dS . K added into dq_acc (float, zeroed first).
struct FlashAttn2HalfDkdvParams {
  const uint16_t *q, *k, *v, *d_o;
  const float *lse, *delta;
  uint16_t *dk, *dv;
  float* dq_acc;
  int n_q, n_k;
  float scale;
};

// flash_attn2_bwd_dq_convert_mma: dq = dq_acc * scale, `count` elements.
struct FlashAttn2HalfDqConvertParams {
  const float* dq_acc;
  uint16_t* dq;
  int count;
  float scale;
};

}  // namespace lab
