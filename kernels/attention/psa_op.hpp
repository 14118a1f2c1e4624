// PsaOp: YOLO26's PSA attention on device buffers: the psa.cu rearrangements around two Flash Attention 2
// passes (HEAD_DIM = KEY_DIM; V_lo then V_hi, sharing Q, K and one logsumexp buffer), forward and backward;
// or, with the `fused` variant, the forward as one psa_attention_fused launch that leaves the same workspace
// (the backward then runs the tiled FA2 passes; measured slower than `tiled` on the H200, docs/kernels/
// attention.md), and with `fused_tc` as one psa_attention_fused_tc launch (psa_tc.cu: 3xTF32 tensor cores),
// same workspace and backward, or `fused_tc_w16` (psa_tc_w16.cu: the same on 16 warps a CTA); with `mma_fp16`
// / `mma_bf16` the two passes, forward and backward, run on flash_attn2_mma.cu's 16-bit tensor-core kernels
// (FlashAttn2HalfOp), float in and out (the 16-bit training pass's attention). Layouts as in psa.cu; each
// launch passes its psa_params.cuh struct.
#pragma once
#include <cmath>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "kernels/attention/flash_attn2_half_op.hpp"
#include "kernels/attention/flash_attn2_op.hpp"
#include "kernels/common/half_type.hpp"
#include "nvrtc_runtime/backend.hpp"

namespace lab {

inline constexpr const char* kPsaSource = "attention/psa.cu";
inline constexpr const char* kPsaTcSource = "attention/psa_tc.cu";         // the tensor-core forwards
inline constexpr const char* kPsaTcW16Source = "attention/psa_tc_w16.cu";  // the 16-bit ones on 16 warps

struct PsaDims {
  int batch = 1;
  int num_heads = 2;
  int key_dim = 32;
  int n = 400;      // H * W
  float scale = 0;  // softmax scale (key_dim ** -0.5 in Ultralytics)
  int batch_heads() const { return batch * num_heads; }
  size_t head_elems() const { return size_t(batch_heads()) * n * key_dim; }  // one [BH, N, KD] tensor
  float softmax_scale() const { return scale != 0 ? scale : 1.0f / std::sqrt(float(key_dim)); }
};

// Intermediate buffers of one forward + backward; sized by PsaOp::workspace. With `mma_fp16` / `mma_bf16`
// the Flash Attention side (packed, o_lo, o_hi, do_lo, do_hi, grads) holds 16-bit patterns of that type.
struct PsaWorkspace {
  DeviceBuffer packed;        // [4, BH, N, KD]
  DeviceBuffer o_lo, o_hi;    // [BH, N, KD]
  DeviceBuffer lse;           // [BH, N]
  DeviceBuffer do_lo, do_hi;  // [BH, N, KD]
  DeviceBuffer delta;         // [BH, N] scratch of the backward preprocess
  DeviceBuffer grads;         // [2, 3, BH, N, KD]
};

// Empty when the fused forwards (`fused`, `fused_tc`, the 16-bit one) exist for this key width (16 or 32;
// YOLO26 uses 32), else the rule.
std::string psa_fused_problem(int key_dim);
// The largest map (H * W tokens) and the most query rows (batch * heads * tokens) the network runs through
// the fused forward; larger problems take `tiled` (measured crossovers in docs/PERFORMANCE.md).
inline constexpr int kPsaFusedMaxTokens = 1024;
inline constexpr int64_t kPsaFusedMaxRows = 8192;
// The attention kernels of a variant (what `lab source psa_attention` shows): the fused forward kernel alone
// for `fused`, `fused_tc` and `fused_tc_w16`, else the Flash Attention 2 module of the two passes.
CompileRequest psa_attention_compile_request(const std::string& variant, const PsaDims& dims);
// The modules a PsaOp of this variant and shape compiles: psa.cu's kernels, then its Flash Attention 2
// module, then for `fused_tc` (`fused_tc_w16`) psa_tc.cu's (psa_tc_w16.cu's) forward.
std::vector<CompileRequest> psa_compile_requests(const std::string& variant, const PsaDims& dims);

// The element type of the 16-bit variants (`mma_fp16`, `mma_bf16`); none for the float ones.
std::optional<HalfType> psa_half_type(const std::string& variant);
// Empty when the 16-bit variants run at this key width (flash_attn2_mma.cu's HEAD_DIM 32, 64, 128, 256).
std::string psa_half_problem(int key_dim);

class PsaOp {
 public:
  // `variant`: "tiled" or "row_per_cta" (the Flash Attention 2 variant of the composed forward and of the
  // backward), "mma_fp16" / "mma_bf16" (the composed forward and the backward on 16-bit FA2 passes; KEY_DIM
  // 32, 64, 128 or 256), or "fused" / "fused_tc" / "fused_tc_w16" (the one-launch forwards, tiled FA2 for the
  // backward; UsageError for a key width without a fused kernel).
  PsaOp(Backend& backend, const std::string& variant, const PsaDims& dims);
  PsaWorkspace workspace() const;

  // The float rearrangements alone (the runners of psa_pack_qkv, psa_merge_attn; not on the 16-bit
  // variants, whose launch check then names the kernel).
  void pack_qkv(const float* qkv, float* packed) const;
  void extract_v(const float* qkv, float* v_out) const;
  void merge_attn(const float* o_lo, const float* o_hi, float* merged) const;

  // qkv -> merged (v @ attn^T in NCHW) and v_out (the V channels), leaving O_lo, O_hi, L in `ws`.
  void forward(const float* qkv, float* merged, float* v_out, PsaWorkspace& ws) const;
  // Gradients d_merged (of merged) and d_v (of v_out) -> d_qkv, using the forward's `ws`.
  void backward(const float* d_merged, const float* d_v, float* d_qkv, PsaWorkspace& ws) const;

  const PsaDims& dims() const { return dims_; }
  // The 16-bit passes' element type (mma_fp16, mma_bf16); none for the float variants.
  std::optional<HalfType> half_type() const { return half_; }
  // The float Flash Attention 2 op of the two passes (its `probs` rebuilds attention maps from
  // `ws.packed`/`ws.lse`); RuntimeError for the 16-bit variants, which have none.
  const FlashAttn2Op& fa2() const;

 private:
  LaunchConfig transpose_config(int sections_per_head) const;
  void pack_qkv(const float* qkv, uint16_t* packed) const;
  void merge_attn(const uint16_t* o_lo, const uint16_t* o_hi, float* merged) const;
  void merge_attn_bwd(const float* d_merged, float* do_lo, float* do_hi) const;
  void merge_attn_bwd(const float* d_merged, uint16_t* do_lo, uint16_t* do_hi) const;
  void qkv_grad(const float* grads, const float* d_v, float* d_qkv) const;
  void qkv_grad(const uint16_t* grads, const float* d_v, float* d_qkv) const;
  template <class T, class Fa2>
  void composed_forward(const Fa2& fa2, const float* qkv, float* merged, float* v_out,
                        PsaWorkspace& ws) const;
  template <class T, class Fa2>
  void composed_backward(const Fa2& fa2, const float* d_merged, const float* d_v, float* d_qkv,
                         PsaWorkspace& ws) const;
  Backend& backend_;
  PsaDims dims_;
  std::optional<HalfType> half_;  // the 16-bit passes' element type
  std::optional<FlashAttn2Op> fa2_;
  std::optional<FlashAttn2HalfOp> fa2_half_;
  bool fused_, fused_tc_, w16_;
  std::shared_ptr<Module> module_, tc_module_;
  Kernel fused_forward_, pack_, extract_, merge_, merge_bwd_, qkv_grad_;
};

}  // namespace lab
