// PsaHalfOp: the 16-bit PSA attention forward on device buffers, one psa_attention_half<KD, DT> launch
// (psa_tc.cu): fp16 / bf16 qkv [B, nh*4*KD, H, W] -> merged and v_out [B, nh*2*KD, H, W] in the same type
// and L [BH, N] (natural-log logsumexp) in float. KEY_DIM 16 or 32 (psa_fused_problem).
#pragma once
#include <cstdint>
#include <memory>

#include "kernels/attention/psa_op.hpp"
#include "kernels/common/half_type.hpp"
#include "nvrtc_runtime/backend.hpp"

namespace lab {

// The module PsaHalfOp compiles: psa_tc.cu with psa_attention_half<key_dim, DT>.
CompileRequest psa_half_compile_request(HalfType type, int key_dim);

class PsaHalfOp {
 public:
  // UsageError for a key width without the kernel.
  PsaHalfOp(Backend& backend, HalfType type, const PsaDims& dims);
  void forward(const uint16_t* qkv, uint16_t* merged, uint16_t* v_out, float* lse) const;
  const PsaDims& dims() const { return dims_; }

 private:
  Backend& backend_;
  PsaDims dims_;
  std::shared_ptr<Module> module_;
  Kernel forward_;
};

}  // namespace lab
