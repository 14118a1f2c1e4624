// Parameters of the float32 Flash Attention 2 kernels (flash_attn2.cu), shared by the kernels and the host
// that launches them: plain data, passed by value. Layouts as in flash_attn2.cu.
// The kernels take them `const __grid_constant__`: read in place from the parameter space, which kept the
// registers and spills of the scalar-parameter kernels (without it some tiled instances spilled).
#pragma once

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

}  // namespace lab
