// CPU references for PSA in float64: the rearrangements (pack, extract-V, merge) and the Ultralytics
// Attention formula up to proj/pe, computed directly in its own channel-major form with the full N x N
// softmax matrix:
//   q, k, v = qkv.view(B, nh, 4*KD, N).split([KD, KD, 2*KD], dim=2)
//   attn = softmax((q * scale)^T @ k, dim=-1);  x = (v @ attn^T).view(B, C, H, W);  v_out = v.reshape(B, C,
//   H, W)
#pragma once
#include <cstddef>
#include <vector>

namespace lab {

struct PsaShape {
  int batch = 1;
  int num_heads = 2;
  int key_dim = 32;
  int height = 20;
  int width = 20;
  double scale = 0;  // 0: key_dim ** -0.5
  int n() const { return height * width; }
  int batch_heads() const { return batch * num_heads; }
  int qkv_channels() const { return num_heads * 4 * key_dim; }
  int out_channels() const { return num_heads * 2 * key_dim; }
  size_t qkv_elems() const { return size_t(batch) * qkv_channels() * n(); }    // [B, nh*4*KD, H, W]
  size_t out_elems() const { return size_t(batch) * out_channels() * n(); }    // [B, nh*2*KD, H, W]
  size_t head_elems() const { return size_t(batch_heads()) * n() * key_dim; }  // [BH, N, KD]
  double softmax_scale() const;
};

// qkv [B, nh*4*KD, H, W] -> [4, BH, N, KD].
std::vector<double> psa_pack_reference(const std::vector<double>& qkv, const PsaShape& s);
// qkv -> [B, nh*2*KD, H, W], the V channels.
std::vector<double> psa_extract_v_reference(const std::vector<double>& qkv, const PsaShape& s);
// o_lo, o_hi [BH, N, KD] -> [B, nh*2*KD, H, W], per head [lo | hi].
std::vector<double> psa_merge_reference(const std::vector<double>& o_lo, const std::vector<double>& o_hi,
                                        const PsaShape& s);

struct PsaAttentionRef {
  std::vector<double> x;    // [B, nh*2*KD, H, W], v @ attn^T
  std::vector<double> v;    // [B, nh*2*KD, H, W]
  std::vector<double> lse;  // [BH, N], logsumexp of each attention row (natural log)
};
PsaAttentionRef psa_attention_reference(const std::vector<double>& qkv, const PsaShape& s);
// Gradient with respect to qkv of sum(x * g_x) + sum(v * g_v).
std::vector<double> psa_attention_backward_reference(const std::vector<double>& qkv,
                                                     const std::vector<double>& g_x,
                                                     const std::vector<double>& g_v, const PsaShape& s);

}  // namespace lab
