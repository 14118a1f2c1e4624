// Parameters of the Hopper Flash Attention forward (flash_attn_wgmma.cu), shared by the kernel and the host
// that launches it: plain data, passed by value as `const __grid_constant__` so the tensor maps stay in
// parameter space, where the TMA instructions read them.
#pragma once
#if !defined(__CUDACC_RTC__)
#include <cstdint>  // NVRTC has none: common/lab_mma.cuh, included first, defines uint16_t there
#endif

// lab::TensorMap comes from common/lab_tensor_map.cuh, included first: by common/lab_tma.cuh in the kernel,
// by nvrtc_runtime/tensor_map.hpp (through the backend) on the host.

namespace lab {

// flash_attn_wgmma_fwd: O (16-bit) and L (float) from Q, K, V (16-bit). The maps are 3-D views of
// Q [BH, N_CTX_Q, HEAD_DIM] and K, V [BH, N_CTX_K, HEAD_DIM] (dimension 0 = HEAD_DIM) with boxes of
// 64 elements x the tile's rows x 1 and 128-byte swizzle (flash_attn_wgmma_op.cpp makes them).
struct FlashAttnWgmmaFwdParams {
  TensorMap q_map, k_map, v_map;
  uint16_t* o;
  float* lse;
  int n_q, n_k;
  float scale;
  int batch_heads;  // BH: the query blocks a persistent grid walks (ceil(N_CTX_Q / 128) x BH)
};

}  // namespace lab
