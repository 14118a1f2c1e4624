// PsaHalfOp: the 16-bit PSA attention forward on device buffers, one launch (psa_tc.cu): fp16 / bf16 qkv
// (per head the channels [q (KD) | k (KD) | v (2 KD)]) -> merged and v_out (nh*2*KD channels) in the same
// type and L [BH, N] (natural-log logsumexp) in float, BH = B * nh, N = H * W. KEY_DIM 16 or 32
// (psa_fused_problem). Two layouts of the 16-bit tensors:
//   forward       NCHW planes: qkv [B, nh*4*KD, H, W], merged and v_out [B, nh*2*KD, H, W]
//                 (psa_attention_half<KD, DT>).
//   forward_nhwc  NHWC views with a pitch: element (pixel, c) at data[pixel * pitch + c], pixel = b * N + n
//                 (psa_attention_half_nhwc<KD, DT>). qkv's channels [0, nh*4*KD) are read; merged's and
//                 v_out's channels [0, nh*2*KD) written, the rest of each pitch left unchanged, so merged and
//                 v_out may be channel slices of wider tensors (pass the slice's first channel).
// Variants: "mma" (psa_tc.cu: 8 warps share a CTA's keys), "mma_w16" (psa_tc_w16.cu: 16 warps, a shorter
// chain per warp; the _w16 entries) and "mma_staged" (psa_tc.cu's psa_attention_half_nhwc_staged: the keys
// staged in shared memory; NHWC only, N <= kPsaFusedMaxTokens).
#pragma once
#include <cstdint>
#include <memory>
#include <string>

#include "kernels/attention/psa_op.hpp"
#include "kernels/common/half_type.hpp"
#include "nvrtc_runtime/backend.hpp"

namespace lab {

enum class PsaHalfVariant { Mma, MmaW16, MmaStaged };

// The module PsaHalfOp compiles for `variant`: psa_tc.cu with psa_attention_half<key_dim, DT> and its _nhwc
// twin ("mma"), psa_tc_w16.cu with their _w16 versions ("mma_w16"), or psa_tc.cu with
// psa_attention_half_nhwc_staged ("mma_staged"); UsageError for another variant.
CompileRequest psa_half_compile_request(const std::string& variant, HalfType type, int key_dim);
// The variant the 16-bit NHWC network runs.
inline constexpr const char* kPsaHalfNetworkVariant = "mma";

// The NHWC attention forward the NHWC network runs: PsaHalfOp on fp16 / bf16 activations, PsaTf32NhwcOp
// (psa_tf32_nhwc_op.hpp) on float ones. Views as forward_nhwc below says.
// The view checks of forward_nhwc for `kernel` (named in the one-line UsageError): qkv of nh*4*KD channels,
// merged and v_out of nh*2*KD each, pitches multiples of 8 of at least those, views 16-byte aligned.
void check_psa_nhwc_views(const char* kernel, const PsaDims& dims, const void* qkv, int qkv_pitch,
                          const void* merged, int merged_pitch, const void* v_out, int v_pitch);

class PsaNhwcForward {
 public:
  virtual ~PsaNhwcForward() = default;
  virtual void forward_nhwc(const void* qkv, int qkv_pitch, void* merged, int merged_pitch, void* v_out,
                            int v_pitch, float* lse) const = 0;
  virtual const PsaDims& dims() const = 0;
};

class PsaHalfOp : public PsaNhwcForward {
 public:
  // UsageError for a key width without the kernel, an unknown variant, or mma_staged past its token limit.
  PsaHalfOp(Backend& backend, const std::string& variant, HalfType type, const PsaDims& dims);
  // UsageError for mma_staged (NHWC only).
  void forward(const uint16_t* qkv, uint16_t* merged, uint16_t* v_out, float* lse) const;
  // UsageError (check_nhwc_view) on a view not set, a pitch below its tensor's channels or not a multiple
  // of 8, or a pointer not 16-byte aligned (a channel offset not a multiple of 8).
  void forward_nhwc(const void* qkv, int qkv_pitch, void* merged, int merged_pitch, void* v_out, int v_pitch,
                    float* lse) const override;
  const PsaDims& dims() const override { return dims_; }

 private:
  LaunchConfig launch_shape() const;  // grid (ceil(N / 16), BH); the variant's block and shared memory

  Backend& backend_;
  PsaDims dims_;
  PsaHalfVariant variant_;
  std::shared_ptr<Module> module_;
  Kernel forward_;  // not for mma_staged
  Kernel forward_nhwc_;
};

}  // namespace lab
