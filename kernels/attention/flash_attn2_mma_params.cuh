// Parameters of the fp16 / bf16 Flash Attention 2 kernels (flash_attn2_mma.cu), shared by the kernels and the
// host that launches them: plain data, passed by value. Q, K, V, O and the gradients are 16-bit patterns
// (uint16_t), L and D float32; layouts as in flash_attn2_mma.cu.
// The kernels take them `const __grid_constant__`: read in place from the parameter space, which kept the
// registers and spills of the scalar-parameter kernels (without it some tiled instances spilled).
#pragma once
#if !defined(__CUDACC_RTC__)
#include <cstdint>  // NVRTC has none: common/lab_mma.cuh, included first, defines uint16_t there
#endif

namespace lab {

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

// flash_attn2_bwd_dkdv_mma: dK, dV (16-bit); with FUSED_DQ also dS . K added into dq_acc (float, zeroed).
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
