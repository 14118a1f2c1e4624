// Float64 PSA references, indexed the way the Ultralytics module views its tensors ([B, nh, channels, N]),
// independently of the packed layouts the kernels use.
#include "kernels/attention/psa_reference.hpp"

#include <algorithm>
#include <cmath>

namespace lab {
namespace {

// Index of qkv[b, h, ch, n] in the [B, nh*4*KD, N] tensor viewed as [B, nh, 4*KD, N].
size_t qkv_at(const PsaShape& s, int b, int h, int ch, int n) {
  return ((size_t(b) * s.num_heads + h) * 4 * s.key_dim + ch) * s.n() + n;
}
// Index of out[b, h*2*KD + ch, n] in a [B, nh*2*KD, N] tensor.
size_t out_at(const PsaShape& s, int b, int h, int ch, int n) {
  return ((size_t(b) * s.num_heads + h) * 2 * s.key_dim + ch) * s.n() + n;
}

// attn[i][j] = softmax_j(scale * sum_c q[c][i] k[c][j]) for one (b, h); returns the row logsumexps.
std::vector<double> attention_matrix(const std::vector<double>& qkv, const PsaShape& s, int b, int h,
                                     std::vector<double>& attn) {
  const int N = s.n(), KD = s.key_dim;
  const double scale = s.softmax_scale();
  attn.assign(size_t(N) * N, 0.0);
  std::vector<double> lse(N);
  for (int c = 0; c < KD; ++c)
    for (int i = 0; i < N; ++i) {
      const double qi = qkv[qkv_at(s, b, h, c, i)] * scale;
      const double* k = qkv.data() + qkv_at(s, b, h, KD + c, 0);
      double* row = attn.data() + size_t(i) * N;
      for (int j = 0; j < N; ++j) row[j] += qi * k[j];
    }
  for (int i = 0; i < N; ++i) {
    double* row = attn.data() + size_t(i) * N;
    const double mx = *std::max_element(row, row + N);
    double sum = 0;
    for (int j = 0; j < N; ++j) sum += (row[j] = std::exp(row[j] - mx));
    for (int j = 0; j < N; ++j) row[j] /= sum;
    lse[i] = mx + std::log(sum);
  }
  return lse;
}

}  // namespace

double PsaShape::softmax_scale() const {
  return scale != 0 ? scale : 1.0 / std::sqrt(double(key_dim));
}

std::vector<double> psa_pack_reference(const std::vector<double>& qkv, const PsaShape& s) {
  const int N = s.n(), KD = s.key_dim, BH = s.batch_heads();
  std::vector<double> out(size_t(4) * BH * N * KD);
  for (int b = 0; b < s.batch; ++b)
    for (int h = 0; h < s.num_heads; ++h)
      for (int sec = 0; sec < 4; ++sec)
        for (int n = 0; n < N; ++n)
          for (int c = 0; c < KD; ++c)
            out[((size_t(sec) * BH + b * s.num_heads + h) * N + n) * KD + c] =
                qkv[qkv_at(s, b, h, sec * KD + c, n)];
  return out;
}

std::vector<double> psa_extract_v_reference(const std::vector<double>& qkv, const PsaShape& s) {
  std::vector<double> out(s.out_elems());
  for (int b = 0; b < s.batch; ++b)
    for (int h = 0; h < s.num_heads; ++h)
      for (int c = 0; c < 2 * s.key_dim; ++c)
        for (int n = 0; n < s.n(); ++n)
          out[out_at(s, b, h, c, n)] = qkv[qkv_at(s, b, h, 2 * s.key_dim + c, n)];
  return out;
}

std::vector<double> psa_merge_reference(const std::vector<double>& o_lo, const std::vector<double>& o_hi,
                                        const PsaShape& s) {
  const int N = s.n(), KD = s.key_dim;
  std::vector<double> out(s.out_elems());
  for (int b = 0; b < s.batch; ++b)
    for (int h = 0; h < s.num_heads; ++h)
      for (int n = 0; n < N; ++n)
        for (int c = 0; c < KD; ++c) {
          const size_t src = ((size_t(b) * s.num_heads + h) * N + n) * KD + c;
          out[out_at(s, b, h, c, n)] = o_lo[src];
          out[out_at(s, b, h, KD + c, n)] = o_hi[src];
        }
  return out;
}

PsaAttentionRef psa_attention_reference(const std::vector<double>& qkv, const PsaShape& s) {
  const int N = s.n(), KD = s.key_dim;
  PsaAttentionRef r;
  r.x.assign(s.out_elems(), 0.0);
  r.v = psa_extract_v_reference(qkv, s);
  r.lse.resize(size_t(s.batch_heads()) * N);
  std::vector<double> attn;
  for (int b = 0; b < s.batch; ++b)
    for (int h = 0; h < s.num_heads; ++h) {
      auto lse = attention_matrix(qkv, s, b, h, attn);
      std::copy(lse.begin(), lse.end(), r.lse.begin() + (size_t(b) * s.num_heads + h) * N);
      // x[c][i] = sum_j v[c][j] attn[i][j]
      for (int c = 0; c < 2 * KD; ++c) {
        const double* v = qkv.data() + qkv_at(s, b, h, 2 * KD + c, 0);
        double* x = r.x.data() + out_at(s, b, h, c, 0);
        for (int i = 0; i < N; ++i) {
          const double* row = attn.data() + size_t(i) * N;
          double acc = 0;
          for (int j = 0; j < N; ++j) acc += v[j] * row[j];
          x[i] = acc;
        }
      }
    }
  return r;
}

std::vector<double> psa_attention_backward_reference(const std::vector<double>& qkv,
                                                     const std::vector<double>& g_x,
                                                     const std::vector<double>& g_v, const PsaShape& s) {
  const int N = s.n(), KD = s.key_dim;
  const double scale = s.softmax_scale();
  std::vector<double> d_qkv(qkv.size(), 0.0), attn, d_attn(size_t(N) * N);
  for (int b = 0; b < s.batch; ++b)
    for (int h = 0; h < s.num_heads; ++h) {
      attention_matrix(qkv, s, b, h, attn);
      // x = v attn^T: dv[c][j] = sum_i g_x[c][i] attn[i][j] (+ g_v), d_attn[i][j] = sum_c g_x[c][i] v[c][j].
      std::fill(d_attn.begin(), d_attn.end(), 0.0);
      for (int c = 0; c < 2 * KD; ++c) {
        const double* gx = g_x.data() + out_at(s, b, h, c, 0);
        const double* v = qkv.data() + qkv_at(s, b, h, 2 * KD + c, 0);
        double* dv = d_qkv.data() + qkv_at(s, b, h, 2 * KD + c, 0);
        const double* gv = g_v.data() + out_at(s, b, h, c, 0);
        for (int j = 0; j < N; ++j) dv[j] = gv[j];
        for (int i = 0; i < N; ++i) {
          const double* row = attn.data() + size_t(i) * N;
          double* drow = d_attn.data() + size_t(i) * N;
          for (int j = 0; j < N; ++j) dv[j] += gx[i] * row[j], drow[j] += gx[i] * v[j];
        }
      }
      // Softmax backward: d_logits[i][j] = attn[i][j] (d_attn[i][j] - sum_j' attn[i][j'] d_attn[i][j']).
      for (int i = 0; i < N; ++i) {
        const double* row = attn.data() + size_t(i) * N;
        double* drow = d_attn.data() + size_t(i) * N;
        double dotp = 0;
        for (int j = 0; j < N; ++j) dotp += row[j] * drow[j];
        for (int j = 0; j < N; ++j) drow[j] = row[j] * (drow[j] - dotp);
      }
      // logits[i][j] = scale sum_c q[c][i] k[c][j].
      for (int c = 0; c < KD; ++c) {
        const double* q = qkv.data() + qkv_at(s, b, h, c, 0);
        const double* k = qkv.data() + qkv_at(s, b, h, KD + c, 0);
        double* dq = d_qkv.data() + qkv_at(s, b, h, c, 0);
        double* dk = d_qkv.data() + qkv_at(s, b, h, KD + c, 0);
        for (int i = 0; i < N; ++i) {
          const double* drow = d_attn.data() + size_t(i) * N;
          double acc = 0;
          for (int j = 0; j < N; ++j) acc += drow[j] * k[j], dk[j] += scale * drow[j] * q[i];
          dq[i] = scale * acc;
        }
      }
    }
  return d_qkv;
}

}  // namespace lab
