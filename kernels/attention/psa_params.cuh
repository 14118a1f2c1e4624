// Parameters of the psa.cu kernels, shared by the kernels and PsaOp that launches them: plain data, passed by
// value. Layouts as in psa.cu (BH = B * NUM_HEADS, N = H * W, KD = KEY_DIM).
#pragma once

namespace lab {

// psa_pack_qkv (out = packed [4, BH, N, KD]) and psa_extract_v (out = v_out [B, nh*2*KD, H, W]).
struct PsaSplitQkvParams {
  const float* qkv;  // [B, nh*4*KD, H, W]
  float* out;
  int batch_heads;
  int key_dim;
  int n;
};

// psa_merge_attn: o_lo, o_hi [BH, N, KD] -> merged [B, nh*2*KD, H, W].
struct PsaMergeParams {
  const float* o_lo;
  const float* o_hi;
  float* merged;
  int key_dim;
  int n;
};

// psa_merge_attn_bwd: d_merged [B, nh*2*KD, H, W] -> do_lo, do_hi [BH, N, KD].
struct PsaMergeBwdParams {
  const float* d_merged;
  float* do_lo;
  float* do_hi;
  int key_dim;
  int n;
};

// psa_qkv_grad: grads [2, 3, BH, N, KD] and d_v [B, nh*2*KD, H, W] -> d_qkv [B, nh*4*KD, H, W].
struct PsaQkvGradParams {
  const float* grads;
  const float* d_v;
  float* d_qkv;
  int batch_heads;
  int key_dim;
  int n;
};

// The same four around 16-bit Flash Attention passes (psa_*_half<DT>): the [.., N, KD] tensors hold fp16 /
// bf16 patterns, the NCHW ones float.
struct PsaPackHalfParams {
  const float* qkv;        // [B, nh*4*KD, H, W]
  unsigned short* packed;  // [4, BH, N, KD]
  int batch_heads;
  int key_dim;
  int n;
};
struct PsaMergeHalfParams {
  const unsigned short* o_lo;
  const unsigned short* o_hi;
  float* merged;
  int key_dim;
  int n;
};
struct PsaMergeBwdHalfParams {
  const float* d_merged;
  unsigned short* do_lo;
  unsigned short* do_hi;
  int key_dim;
  int n;
};
struct PsaQkvGradHalfParams {
  const unsigned short* grads;  // [2, 3, BH, N, KD]
  const float* d_v;
  float* d_qkv;
  int batch_heads;
  int key_dim;
  int n;
};

// psa_attention_fused<KD>: qkv -> merged, v_out, and the workspace the composed path leaves (packed, o_lo,
// o_hi, lse [BH, N]).
struct PsaFusedParams {
  const float* qkv;
  float* merged;
  float* v_out;
  float* packed;
  float* o_lo;
  float* o_hi;
  float* lse;
  int batch_heads;
  int n;
  float scale;  // softmax scale
};

// psa_attention_half<KD, DT> (psa_tc.cu): 16-bit qkv -> merged and v_out in the same 16-bit type (raw
// fp16 / bf16 patterns) and lse [BH, N] in float.
struct PsaHalfParams {
  const unsigned short* qkv;
  unsigned short* merged;
  unsigned short* v_out;
  float* lse;
  int batch_heads;
  int n;
  float scale;  // softmax scale
};

// psa_attention_half_nhwc<KD, DT> (psa_tc.cu): the same on NHWC views with pitches: element (pixel, c) at
// data[pixel * pitch + c], pixel = b * N + n; head h's channels [Q | K | V] from qkv channel h * 4 KD, its
// merged and v_out channels from h * 2 KD. Pitches multiples of 8, pointers 16-byte aligned.
struct PsaHalfNhwcParams {
  const unsigned short* qkv;
  unsigned short* merged;
  unsigned short* v_out;
  float* lse;  // [BH, N]
  int qkv_pitch;
  int merged_pitch;
  int v_pitch;
  int heads;  // per image: head bh is image bh / heads, head bh % heads
  int n;
  float scale;  // softmax scale
};

// psa_attention_tf32_nhwc: PsaHalfNhwcParams' views with float elements.
struct PsaTf32NhwcParams {
  const float* qkv;
  float* merged;
  float* v_out;
  float* lse;  // [BH, N]
  int qkv_pitch;
  int merged_pitch;
  int v_pitch;
  int heads;  // per image: head bh is image bh / heads, head bh % heads
  int n;
  float scale;  // softmax scale
};

#if defined(__CUDACC_RTC__) || defined(__CUDACC__)
#define LAB_PSA_SHARED_FN __host__ __device__ constexpr
#else
#define LAB_PSA_SHARED_FN constexpr
#endif

// The row merge's shared memory (psa_tc::RowMergeShared): every warp's partial outputs [warp][16 rows][2 KD +
// kPsaRowMergePad] and maxima and sums [warp][16 rows], all float.
constexpr int kPsaRowMergePad = 4;
LAB_PSA_SHARED_FN int psa_row_merge_bytes(int warps, int key_dim) {
  return int(sizeof(float)) * warps * 16 * (2 * key_dim + kPsaRowMergePad + 2);
}

// psa_tc_w16.cu's CTA: 16 warps share its keys; its dynamic shared memory is their row merge.
constexpr int kPsaW16Warps = 16;
LAB_PSA_SHARED_FN int psa_w16_shared_bytes(int key_dim) {
  return psa_row_merge_bytes(kPsaW16Warps, key_dim);
}

// psa_attention_half_nhwc_staged's shared memory (psa_tc.cu): rows of 16-bit elements, K | V rows of 3 KD + 8
// and Q rows of KD + 8 (16 bytes of pad), the head's 16 ceil(N / 16) K | V rows then the CTA's 16 Q rows; the
// row merge of its 8 warps reuses them.
LAB_PSA_SHARED_FN int psa_staged_kv_row(int key_dim) {
  return 3 * key_dim + 8;
}
LAB_PSA_SHARED_FN int psa_staged_q_row(int key_dim) {
  return key_dim + 8;
}
LAB_PSA_SHARED_FN int psa_staged_shared_bytes(int key_dim, int n) {
  const int rows = 2 * (16 * ((n + 15) / 16) * psa_staged_kv_row(key_dim) + 16 * psa_staged_q_row(key_dim));
  const int merge = psa_row_merge_bytes(8, key_dim);
  return rows > merge ? rows : merge;
}

}  // namespace lab
