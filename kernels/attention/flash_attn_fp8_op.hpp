// FlashAttnFp8Op: the fp8 Hopper Flash Attention forward of flash_attn_fp8.cu on e4m3 Q, K, V with per-tensor
// scales (HEAD_DIM 128): the V^T pre-pass and the forward, launchable together or apart.
#pragma once
#include <cstdint>
#include <memory>

#include "kernels/attention/flash_attn2_op.hpp"
#include "nvrtc_runtime/backend.hpp"

namespace lab {

inline constexpr const char* kFlashAttnFp8Source = "attention/flash_attn_fp8.cu";

// The per-tensor scales: a tensor's value is its e4m3 code's value times its scale.
struct Fp8Scales {
  float q = 1, k = 1, v = 1;
};

// The keys of V^T's rows: N_CTX_K rounded up to 16.
inline int fp8_padded_keys(int n_k) {
  return (n_k + 15) / 16 * 16;
}

// The module's request: the pre-pass and the forward (sm_90a) running exp2_fma of every 8 softmax
// exponentials on the FMA pipe (0 to 8; others throw UsageError).
CompileRequest fa_fp8_compile_request(int exp2_fma = 0);

class FlashAttnFp8Op {
 public:
  explicit FlashAttnFp8Op(Backend& backend, int exp2_fma = 0);
  // vt [BH, 128, fp8_padded_keys(n_k)] from v [BH, n_k, 128], both e4m3.
  void transpose_v(const uint8_t* v, uint8_t* vt, int batch_heads, int n_k) const;
  // O (fp16) and L (float) from Q [BH, N_CTX_Q, 128], K [BH, N_CTX_K, 128] and transpose_v's V^T, e4m3;
  // p.scale is the softmax scale of the dequantised scores.
  void forward(const uint8_t* q, const uint8_t* k, const uint8_t* vt, uint16_t* o, float* lse,
               const AttentionProblem& p, const Fp8Scales& scales) const;

 private:
  Backend& backend_;
  std::shared_ptr<Module> module_;
  Kernel vt_, fwd_;
};

}  // namespace lab
