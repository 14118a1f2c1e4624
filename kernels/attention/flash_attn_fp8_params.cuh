// Parameters of the fp8 Hopper Flash Attention forward (flash_attn_fp8.cu), shared by the kernels and the host
// that launches them: plain data, passed by value as `const __grid_constant__` (the tensor maps stay in
// parameter space, where TMA reads them).
#pragma once
#if !defined(__CUDACC_RTC__)
#include <cstdint>  // NVRTC has none: common/lab_mma.cuh, included first, defines uint16_t there
#endif

// lab::TensorMap comes from common/lab_tensor_map.cuh (kernel) or nvrtc_runtime/tensor_map.hpp (host).

namespace lab {

// flash_attn_fp8_vt: V^T of e4m3 V [BH, N_CTX_K, 128] as [BH, 128, n_k_padded] (n_k rounded up to 16, the
// padding zero), the keys of each 16 in lab_e4m3_p_column order (common/lab_wgmma.cuh).
struct FlashAttnFp8VtParams {
  const unsigned char* v;
  unsigned char* vt;
  int n_k, n_k_padded;
};

// flash_attn_fp8_fwd: O (fp16) and L (float) from e4m3 Q, K and V^T with per-tensor scales. The maps are 3-D
// views, dimension 0 innermost, with 128-byte swizzle: Q [BH, N_CTX_Q, 128] (box 128 x 128 rows), K
// [BH, N_CTX_K, 128] (box 128 x BN rows), V^T [BH, 128, n_k_padded] (box BN keys x 128 rows). score_scale is
// softmax scale * q_scale * k_scale; v_scale multiplies O.
struct FlashAttnFp8FwdParams {
  TensorMap q_map, k_map, vt_map;
  uint16_t* o;
  float* lse;
  int n_q, n_k;
  float score_scale, v_scale;
};

}  // namespace lab
