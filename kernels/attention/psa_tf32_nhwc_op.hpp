// PsaTf32NhwcOp: the PSA attention forward of the float NHWC networks (ActivationType tf32 and f32), one
// launch of psa_tc.cu's psa_attention_tf32_nhwc<KD, DT> (3xTF32 products: float32 accuracy) on NHWC float
// views with pitches: qkv (per head the channels [q (KD) | k (KD) | v (2 KD)]) -> merged (stored as the type
// stores: tf32 values or unrounded) and v_out (nh*2*KD channels, written into channel slices) and L [BH, N]
// (natural-log logsumexp). KEY_DIM 16 or 32 (psa_fused_problem).
#pragma once
#include <memory>

#include "kernels/attention/psa_half_op.hpp"
#include "kernels/attention/psa_op.hpp"
#include "kernels/common/activation_type.hpp"
#include "nvrtc_runtime/backend.hpp"

namespace lab {

// The module PsaTf32NhwcOp compiles: psa_tc.cu with psa_attention_tf32_nhwc<key_dim, DT>; `type` tf32 or f32.
CompileRequest psa_tf32_nhwc_compile_request(ActivationType type, int key_dim);

class PsaTf32NhwcOp : public PsaNhwcForward {
 public:
  // UsageError for a key width without the kernel or a type other than tf32 and f32.
  PsaTf32NhwcOp(Backend& backend, ActivationType type, const PsaDims& dims);
  // Float views (PsaHalfOp::forward_nhwc's rules): UsageError (check_nhwc_view) on a view not set, a pitch
  // below its tensor's channels or not a multiple of 8, or a pointer not 16-byte aligned.
  void forward_nhwc(const void* qkv, int qkv_pitch, void* merged, int merged_pitch, void* v_out, int v_pitch,
                    float* lse) const override;
  const PsaDims& dims() const override { return dims_; }

 private:
  Backend& backend_;
  PsaDims dims_;
  std::shared_ptr<Module> module_;
  Kernel forward_;
};

}  // namespace lab
