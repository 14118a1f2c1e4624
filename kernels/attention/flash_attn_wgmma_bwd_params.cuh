// Parameters of the Hopper Flash Attention backward (flash_attn_wgmma_bwd.cu), shared by the kernel and the
// host that launches it: plain data, passed by value as `const __grid_constant__` so the tensor maps stay in
// parameter space, where the TMA instructions read them.
#pragma once
#if !defined(__CUDACC_RTC__)
#include <cstdint>  // NVRTC has none: common/lab_mma.cuh, included first, defines uint16_t there
#endif

// lab::TensorMap comes from common/lab_tensor_map.cuh, included first: by common/lab_tma.cuh in the kernel,
// by nvrtc_runtime/tensor_map.hpp (through the backend) on the host.

namespace lab {

// flash_attn_wgmma_bwd: dK, dV (16-bit) and, when FUSED_DQ, dS . K added into dq_acc (float, zeroed before;
// scaled and rounded by flash_attn2_mma.cu's conversion after). The maps are 3-D views of Q, dO
// [BH, N_CTX_Q, HEAD_DIM] (boxes of 64 elements x BM rows) and K, V [BH, N_CTX_K, HEAD_DIM] (64 x 128),
// 128-byte swizzled (flash_attn_wgmma_bwd_op.cpp makes them); L (natural log, as the forward writes it) and
// D = rowsum(dO * O) are float [BH, N_CTX_Q].
struct FlashAttnWgmmaBwdParams {
  TensorMap q_map, k_map, v_map, do_map;
  const float *lse, *delta;
  uint16_t *dk, *dv;
  float* dq_acc;
  int n_q, n_k;
  float scale;
};

}  // namespace lab
