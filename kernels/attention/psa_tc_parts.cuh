// psa_tc_parts: the pieces of the tensor-core PSA forwards that do not depend on how many warps share a CTA's
// keys (psa_tc.cu: 8 warps, psa_tc_w16.cu: 16): a warp's online-softmax state and step, the 16-bit step on
// tensor cores, the walk over a warp's range of key tiles, and the NHWC row-piece loads. The design and the
// operand layouts are psa_tc.cu's header comment.
#pragma once
#include "common/lab.cuh"
#include "common/lab_mma.cuh"
#include "attention/psa_params.cuh"

namespace psa_tc {
constexpr int kRows = 16;  // query rows per CTA: one mma M tile
constexpr float kLog2e = 1.4426950408889634f;
constexpr float kLn2 = 0.6931471805599453f;
constexpr float kMasked = -1.0e30f;  // score of a key beyond N: finite, so exp2f gives 0 and never NaN

// A warp's running softmax state for its two accumulator rows (g and g + 8) and its share of the 16 x VD
// outputs: o[nt] = the m16n8 accumulator of value columns 8 nt .. 8 nt + 7.
template <int NT>
struct WarpState {
  float m[2] = {kMasked, kMasked};  // running max (log2 domain), the same on the 4 lanes of a quad
  float l[2] = {0.f, 0.f};          // this lane's part of the running sum
  float o[NT][4] = {};
};

// The softmax's exp2 of x <= 0: exp2f, or with FAST the single ex2.approx.ftz (lab_exp2_ftz: a relative error
// near 2^-22, subnormal results flushed to 0; the 16-bit _w16 kernels, whose P is rounded to 16 bits anyway).
template <bool FAST>
__device__ __forceinline__ float softmax_exp2(float x) {
  if constexpr (FAST)
    return lab_exp2_ftz(x);
  else
    return exp2f(x);
}

// One online-softmax step over CH score tiles s[j] (m16n8 accumulators, log2 domain, masked keys at kMasked):
// updates the max, rescales the sum and the outputs, and turns s into the probabilities exp2(s - max).
template <bool FAST, int CH, int NT>
__device__ __forceinline__ void softmax_step(float (&s)[CH][4], WarpState<NT>& w) {
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    float mx = w.m[h];
#pragma unroll
    for (int j = 0; j < CH; ++j) mx = fmaxf(mx, fmaxf(s[j][2 * h], s[j][2 * h + 1]));
    const float m_new = lab_group4_max(mx), alpha = softmax_exp2<FAST>(w.m[h] - m_new);
    float sum = 0.f;
#pragma unroll
    for (int j = 0; j < CH; ++j) {
      s[j][2 * h] = softmax_exp2<FAST>(s[j][2 * h] - m_new);
      s[j][2 * h + 1] = softmax_exp2<FAST>(s[j][2 * h + 1] - m_new);
      sum += s[j][2 * h] + s[j][2 * h + 1];
    }
    w.l[h] = w.l[h] * alpha + sum;
    w.m[h] = m_new;
#pragma unroll
    for (int nt = 0; nt < NT; ++nt) {
      w.o[nt][2 * h] *= alpha;
      w.o[nt][2 * h + 1] *= alpha;
    }
  }
}

// One softmax step of the 16-bit kernels over the CH 16-key tiles from tile0 (the warp's range ends at
// `end`): S = Q K^T on the fragments kf (score tiles 2j and 2j + 1 are the two 8-key halves of tile j), the
// masking of keys past the range or past N, the online softmax, then O += P V on the fragments vf with P
// rounded to DT. The order of the KD sums and of the value columns is the caller's (its loads fix both).
template <int DT, bool FAST, int CH, int KS, int NT>
__device__ __forceinline__ void half_step(const uint32_t (&q)[KS][4], const uint32_t (&kf)[2 * CH][KS][2],
                                          const uint32_t (&vf)[CH][NT][2], int tile0, int end, int n, int t,
                                          float c_log2, WarpState<NT>& w) {
  float s[2 * CH][4];
#pragma unroll
  for (int j = 0; j < 2 * CH; ++j) {
    const int key0 = (tile0 + j / 2) * 16 + (j % 2) * 8;
#pragma unroll
    for (int i = 0; i < 4; ++i) s[j][i] = 0.f;
    if (tile0 + j / 2 < end) {  // warp-uniform
#pragma unroll
      for (int ks = 0; ks < KS; ++ks) lab_mma_16816<DT>(s[j], q[ks], kf[j][ks]);
    }
#pragma unroll
    for (int i = 0; i < 4; ++i)
      s[j][i] = tile0 + j / 2 < end && key0 + 2 * t + i % 2 < n ? s[j][i] * c_log2 : kMasked;
  }
  softmax_step<FAST>(s, w);
#pragma unroll
  for (int j = 0; j < CH; ++j) {
    if (tile0 + j >= end) continue;  // warp-uniform
    const uint32_t a[4] = {lab_pack2<DT>(s[2 * j][0], s[2 * j][1]), lab_pack2<DT>(s[2 * j][2], s[2 * j][3]),
                           lab_pack2<DT>(s[2 * j + 1][0], s[2 * j + 1][1]),
                           lab_pack2<DT>(s[2 * j + 1][2], s[2 * j + 1][3])};
#pragma unroll
    for (int nt = 0; nt < NT; ++nt) lab_mma_16816<DT>(w.o[nt], a, vf[j][nt]);
  }
}

// This warp's contiguous range [begin, end) of the `tiles` key tiles of a head split over WARPS warps.
template <int WARPS>
__device__ __forceinline__ void key_tile_range(int tiles, int warp, int& begin, int& end) {
  begin = warp * tiles / WARPS;
  end = (warp + 1) * tiles / WARPS;
}

// Leaves this warp's state in `sh` (a merge layout with maxima m[warp][row] and sums l[warp][row]): its rows
// g and g + 8, and their outputs through store_pair(row, col, o[col], o[col + 1]) for columns col = 8 nt +
// 2t.
template <int NT, class Shared, class StorePair>
__device__ __forceinline__ void publish_state(const WarpState<NT>& w, Shared& sh, int warp, int lane,
                                              StorePair store_pair) {
  const int g = lane / 4, t = lane % 4;
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const int row = g + 8 * h;
    const float l_row = lab_group4_sum(w.l[h]);
#pragma unroll
    for (int nt = 0; nt < NT; ++nt) store_pair(row, 8 * nt + 2 * t, w.o[nt][2 * h], w.o[nt][2 * h + 1]);
    if (t == 0) {
      sh.m[warp][row] = w.m[h];
      sh.l[warp][row] = l_row;
    }
  }
}

// The 16-bit kernels' walk over this warp's range of 16-key tiles (of WARPS ranges), CH tiles per step:
// load(tile0, kf, vf) fills the step's K and V fragments, then half_step. HOIST: the first step's loads are
// issued before the loop and each next step's after the current one's products. Loads in the loop body are
// scheduled by ptxas within the body, and it sinks wide V loads behind the step's score products (a second
// global round trip per step); issued in the block before the loop, every load of a warp's only step (N <=
// 512) precedes its first product. The NCHW kernel keeps its loads in the body: its 208 scalar loads already
// precede the products there, and hoisting them costs it 254 registers at KD 32 and spills at KD 16.
template <int DT, bool FAST, int CH, bool HOIST, int WARPS, int KS, int NT, class Load>
__device__ __forceinline__ void attend_half(const uint32_t (&q)[KS][4], int n, int warp, int t, float scale,
                                            Load load, WarpState<NT>& w) {
  const float c_log2 = scale * kLog2e;
  int begin, end;
  key_tile_range<WARPS>((n + 15) / 16, warp, begin, end);
  if constexpr (HOIST) {
    uint32_t kf[2 * CH][KS][2], vf[CH][NT][2];
    if (begin < end) load(begin, kf, vf);
    for (int tile0 = begin; tile0 < end; tile0 += CH) {
      half_step<DT, FAST>(q, kf, vf, tile0, end, n, t, c_log2, w);
      if (tile0 + CH < end) load(tile0 + CH, kf, vf);
    }
  } else {
    for (int tile0 = begin; tile0 < end; tile0 += CH) {
      uint32_t kf[2 * CH][KS][2], vf[CH][NT][2];
      load(tile0, kf, vf);
      half_step<DT, FAST>(q, kf, vf, tile0, end, n, t, c_log2, w);
    }
  }
}

// W 32-bit words (2 W 16-bit channels) at p, 16-byte (W 4) or 8-byte (W 2) aligned; zeros when !valid.
template <int W>
__device__ __forceinline__ void load_words(const uint16_t* p, bool valid, uint32_t (&words)[W]) {
  static_assert(W == 2 || W == 4, "a row piece of 4 or 8 channels");
  if constexpr (W == 4) {
    uint4 v{};
    if (valid) v = *reinterpret_cast<const uint4*>(p);
    words[0] = v.x, words[1] = v.y, words[2] = v.z, words[3] = v.w;
  } else {
    uint2 v{};
    if (valid) v = *reinterpret_cast<const uint2*>(p);
    words[0] = v.x, words[1] = v.y;
  }
}

// 16-bit element e of `lo`'s words in the low half, element e of `hi`'s in the high half.
template <int W>
__device__ __forceinline__ uint32_t pair_halves(const uint32_t (&lo)[W], const uint32_t (&hi)[W], int e) {
  return e % 2 == 0 ? (lo[e / 2] & 0xffffu) | hi[e / 2] << 16 : lo[e / 2] >> 16 | (hi[e / 2] & 0xffff0000u);
}
// The NHWC kernels' fragments (psa_attention_half_nhwc's orders, its comment): token(row) points at this
// head's channels [Q | K | V] of token `row`. Q: rows n0 + g and n0 + g + 8, lane (g, t)'s piece t of KD / 4
// channels.
template <int KD, int KS, class Token>
__device__ __forceinline__ void nhwc_query(const Token& token, int n, int n0, int g, int t,
                                           uint32_t (&q)[KS][4]) {
  constexpr int W = KD / 8;
  uint32_t lo[W], hi[W];  // rows g and g + 8
  load_words(token(n0 + g) + t * W * 2, n0 + g < n, lo);
  load_words(token(n0 + g + 8) + t * W * 2, n0 + g + 8 < n, hi);
#pragma unroll
  for (int ks = 0; ks < KS; ++ks) {
    q[ks][0] = lo[2 * ks], q[ks][1] = hi[2 * ks], q[ks][2] = lo[2 * ks + 1], q[ks][3] = hi[2 * ks + 1];
  }
}

// The K and V fragments of the CH 16-key tiles from tile0 (KT = 2 CH score tiles of 8 keys): K's piece t of
// keys g, V's channels [g NT, (g + 1) NT) of keys 2t, 2t + 1, 2t + 8, 2t + 9, each key's halves paired.
template <int KD, int KT, int CH, int KS, int NT, class Token>
__device__ __forceinline__ void nhwc_fragments(const Token& token, int n, int tile0, int g, int t,
                                               uint32_t (&kf)[KT][KS][2], uint32_t (&vf)[CH][NT][2]) {
  static_assert(KT == 2 * CH, "two 8-key score tiles per 16-key tile");
  constexpr int W = KD / 8;
#pragma unroll
  for (int j = 0; j < KT; ++j) {
    const int key = (tile0 + j / 2) * 16 + (j % 2) * 8 + g;
    uint32_t piece[W];
    load_words(token(key) + KD + t * W * 2, key < n, piece);
#pragma unroll
    for (int ks = 0; ks < KS; ++ks) kf[j][ks][0] = piece[2 * ks], kf[j][ks][1] = piece[2 * ks + 1];
  }
#pragma unroll
  for (int j = 0; j < CH; ++j) {
    const int key = (tile0 + j) * 16 + 2 * t;
    uint32_t v[4][W];  // keys 2t, 2t + 1, 2t + 8, 2t + 9 of the tile
#pragma unroll
    for (int k = 0; k < 4; ++k) {
      const int row = key + k % 2 + 8 * (k / 2);
      load_words(token(row) + 2 * KD + g * NT, row < n, v[k]);
    }
#pragma unroll
    for (int nt = 0; nt < NT; ++nt) {
      vf[j][nt][0] = pair_halves(v[0], v[1], nt);
      vf[j][nt][1] = pair_halves(v[2], v[3], nt);
    }
  }
}

// The NCHW kernels' fragments (psa_attention_half's orders): head = this head's channel planes [Q | K | V],
// each N wide; element (channel, row) and (channel2, row2) of a section packed low then high, 0 beyond N.
template <int KD>
struct NchwHalfHead {
  const uint16_t* head;
  int n;

  __device__ __forceinline__ uint32_t at(int section, int channel, int row) const {
    return row < n ? head[size_t(section * KD + channel) * n + row] : 0u;
  }
  __device__ __forceinline__ uint32_t pair(int section, int channel, int row, int channel2, int row2) const {
    return at(section, channel, row) | at(section, channel2, row2) << 16;
  }
  template <int KS>
  __device__ __forceinline__ void query(int n0, int g, int t, uint32_t (&q)[KS][4]) const {
#pragma unroll
    for (int ks = 0; ks < KS; ++ks) {
      const int c = 16 * ks + 2 * t;
      q[ks][0] = pair(0, c, n0 + g, c + 1, n0 + g);
      q[ks][1] = pair(0, c, n0 + g + 8, c + 1, n0 + g + 8);
      q[ks][2] = pair(0, c + 8, n0 + g, c + 9, n0 + g);
      q[ks][3] = pair(0, c + 8, n0 + g + 8, c + 9, n0 + g + 8);
    }
  }
  // Score tiles 2j and 2j + 1 are the two 8-key halves of 16-key tile tile0 + j.
  template <int KT, int CH, int KS, int NT>
  __device__ __forceinline__ void fragments(int tile0, int g, int t, uint32_t (&kf)[KT][KS][2],
                                            uint32_t (&vf)[CH][NT][2]) const {
    static_assert(KT == 2 * CH, "two 8-key score tiles per 16-key tile");
#pragma unroll
    for (int j = 0; j < KT; ++j) {
      const int key = (tile0 + j / 2) * 16 + (j % 2) * 8 + g;
#pragma unroll
      for (int ks = 0; ks < KS; ++ks) {
        const int c = 16 * ks + 2 * t;
        kf[j][ks][0] = pair(1, c, key, c + 1, key);
        kf[j][ks][1] = pair(1, c + 8, key, c + 9, key);
      }
    }
#pragma unroll
    for (int j = 0; j < CH; ++j) {
      const int key = (tile0 + j) * 16 + 2 * t;
#pragma unroll
      for (int nt = 0; nt < NT; ++nt) {
        const int d = 8 * nt + g;
        vf[j][nt][0] = pair(2, d, key, d, key + 1);
        vf[j][nt][1] = pair(2, d, key + 8, d, key + 9);
      }
    }
  }
};
// The float32 kernels' operands (psa_attention_fused_tc's orders, psa_tc.cu's header comment) from a head
// that gives element at(section, channel, row) of its sections [Q | K | V_lo | V_hi] (0 beyond N):
//   NchwFloatHead: this head's channel planes, each N wide (psa_attention_fused_tc, _w16);
//   NhwcFloatHead: token `row` of this head at first + row * pitch, its 4 KD channels side by side
//   (psa_attention_tf32_nhwc).
template <int KD>
struct NchwFloatHead {
  static constexpr int kKeyDim = KD;
  const float* head;
  int n;
  __device__ __forceinline__ float at(int section, int channel, int row) const {
    return row < n ? head[size_t(section * KD + channel) * n + row] : 0.f;
  }
};
template <int KD>
struct NhwcFloatHead {
  static constexpr int kKeyDim = KD;
  const float* first;
  int pitch;
  int n;
  __device__ __forceinline__ float at(int section, int channel, int row) const {
    return row < n ? first[size_t(row) * pitch + section * KD + channel] : 0.f;
  }
};

// Q rows n0 + g, n0 + g + 8 of `head` as the m16n8k8 A operand of each k step.
template <int KS, class Head>
__device__ __forceinline__ void float_query(const Head& head, int n0, int g, int t, float (&q)[KS][4]) {
#pragma unroll
  for (int ks = 0; ks < KS; ++ks) {
    const int c = 8 * ks + t;
    q[ks][0] = head.at(0, c, n0 + g), q[ks][1] = head.at(0, c, n0 + g + 8);
    q[ks][2] = head.at(0, c + 4, n0 + g), q[ks][3] = head.at(0, c + 4, n0 + g + 8);
  }
}

// The K and V fragments of the CH 8-key tiles from tile0. A tile past the warp's range loads the next warp's
// keys, masked by tf32_step; past N the loads give 0.
template <int CH, int KS, int NT, class Head>
__device__ __forceinline__ void float_fragments(const Head& head, int tile0, int g, int t,
                                                float (&kf)[CH][KS][2], float (&vf)[CH][NT][2]) {
#pragma unroll
  for (int j = 0; j < CH; ++j) {
    const int key0 = (tile0 + j) * 8;
#pragma unroll
    for (int ks = 0; ks < KS; ++ks) {
      kf[j][ks][0] = head.at(1, 8 * ks + t, key0 + g);
      kf[j][ks][1] = head.at(1, 8 * ks + t + 4, key0 + g);
    }
#pragma unroll
    for (int nt = 0; nt < NT; ++nt) {  // B rows t and t + 4: keys 2t and 2t + 1 (header comment)
      vf[j][nt][0] = head.at(2, 8 * nt + g, key0 + 2 * t);
      vf[j][nt][1] = head.at(2, 8 * nt + g, key0 + 2 * t + 1);
    }
  }
}

// The float32 kernels' Q operand (float_query's), split into tf32 hi and lo for 3xTF32 once
// (SplitQuery: 2 KS x 4 registers) or at every use (FloatQuery: half the registers, a few more instructions).
template <int KS>
struct SplitQuery {
  uint32_t hi[KS][4], lo[KS][4];
  __device__ __forceinline__ explicit SplitQuery(const float (&q)[KS][4]) {
#pragma unroll
    for (int ks = 0; ks < KS; ++ks)
#pragma unroll
      for (int i = 0; i < 4; ++i) lab_split_tf32(q[ks][i], hi[ks][i], lo[ks][i]);
  }
  __device__ __forceinline__ void operand(int ks, uint32_t (&a_hi)[4], uint32_t (&a_lo)[4]) const {
#pragma unroll
    for (int i = 0; i < 4; ++i) a_hi[i] = hi[ks][i], a_lo[i] = lo[ks][i];
  }
};
template <int KS>
struct FloatQuery {
  float q[KS][4];
  __device__ __forceinline__ void operand(int ks, uint32_t (&a_hi)[4], uint32_t (&a_lo)[4]) const {
#pragma unroll
    for (int i = 0; i < 4; ++i) lab_split_tf32(q[ks][i], a_hi[i], a_lo[i]);
  }
};

// One softmax step of the float32 kernels over the CH 8-key tiles from tile0 (the warp's range ends at
// `end`), every product in 3xTF32: S = Q K^T on the fragments kf, the masking of keys past the range or past
// N, the online softmax, then O += P V on the fragments vf. SPLIT: S's three tf32 products per k step go to
// three accumulators summed at the end, so its dependent chain is KS mma deep instead of 3 KS.
template <bool SPLIT, int CH, int KS, int NT, class Query>
__device__ __forceinline__ void tf32_step(const Query& q, const float (&kf)[CH][KS][2],
                                          const float (&vf)[CH][NT][2], int tile0, int end, int n, int t,
                                          float c_log2, WarpState<NT>& w) {
  float s[CH][4];
#pragma unroll
  for (int j = 0; j < CH; ++j) {
    const int key0 = (tile0 + j) * 8;
#pragma unroll
    for (int i = 0; i < 4; ++i) s[j][i] = 0.f;
    if (tile0 + j < end) {  // warp-uniform
      float lo_hi[4] = {}, hi_lo[4] = {};
#pragma unroll
      for (int ks = 0; ks < KS; ++ks) {
        uint32_t a_hi[4], a_lo[4], b_hi[2], b_lo[2];
        q.operand(ks, a_hi, a_lo);
        lab_split_tf32(kf[j][ks][0], b_hi[0], b_lo[0]);
        lab_split_tf32(kf[j][ks][1], b_hi[1], b_lo[1]);
        if constexpr (SPLIT) {
          lab_mma_1688_tf32(lo_hi, a_lo, b_hi);
          lab_mma_1688_tf32(hi_lo, a_hi, b_lo);
          lab_mma_1688_tf32(s[j], a_hi, b_hi);
        } else {
          lab_mma_1688_3xtf32(s[j], a_hi, a_lo, b_hi, b_lo);
        }
      }
      if constexpr (SPLIT) {
#pragma unroll
        for (int i = 0; i < 4; ++i) s[j][i] += lo_hi[i] + hi_lo[i];
      }
    }
#pragma unroll
    for (int i = 0; i < 4; ++i)
      s[j][i] = tile0 + j < end && key0 + 2 * t + i % 2 < n ? s[j][i] * c_log2 : kMasked;
  }
  softmax_step<false>(s, w);
#pragma unroll
  for (int j = 0; j < CH; ++j) {
    if (tile0 + j >= end) continue;  // warp-uniform
    // A column t is key 2t, column t + 4 key 2t + 1 (header comment).
    uint32_t p_hi[4], p_lo[4];
    lab_split_tf32(s[j][0], p_hi[0], p_lo[0]);
    lab_split_tf32(s[j][2], p_hi[1], p_lo[1]);
    lab_split_tf32(s[j][1], p_hi[2], p_lo[2]);
    lab_split_tf32(s[j][3], p_hi[3], p_lo[3]);
#pragma unroll
    for (int nt = 0; nt < NT; ++nt) {
      uint32_t b_hi[2], b_lo[2];
      lab_split_tf32(vf[j][nt][0], b_hi[0], b_lo[0]);
      lab_split_tf32(vf[j][nt][1], b_hi[1], b_lo[1]);
      lab_mma_1688_3xtf32(w.o[nt], p_hi, p_lo, b_hi, b_lo);
    }
  }
}
// The float32 kernels' walk over this warp's range of 8-key tiles (of WARPS ranges), CH tiles per step: the
// step's K and V loads, every one issued before its first product (one round trip per step), then
// tf32_step<SPLIT>.
template <int CH, int WARPS, bool SPLIT, int NT, class Head, class Query>
__device__ __forceinline__ void attend_tf32(const Head& src, const Query& q, int warp, int g, int t,
                                            float scale, WarpState<NT>& w) {
  constexpr int KS = Head::kKeyDim / 8;
  const float c_log2 = scale * kLog2e;
  int begin, end;
  key_tile_range<WARPS>((src.n + 7) / 8, warp, begin, end);
  for (int tile0 = begin; tile0 < end; tile0 += CH) {
    float kf[CH][KS][2], vf[CH][NT][2];
    float_fragments(src, tile0, g, t, kf, vf);
    tf32_step<SPLIT>(q, kf, vf, tile0, end, src.n, t, c_log2, w);
  }
}
// This CTA's rows of channels [c0, c0 + C) of a head (channel-major, N wide; 0 beyond N) over THREADS
// threads: element it of thread x is channel c0 + i / 16, row n0 + i % 16 for i = x + THREADS it.
template <int C, int THREADS, class T>
__device__ __forceinline__ void load_rows(const T* head, int n, int n0, int c0, int thread,
                                          T (&copy)[C * kRows / THREADS]) {
#pragma unroll
  for (int it = 0; it < C * kRows / THREADS; ++it) {
    const int i = thread + it * THREADS, row = n0 + i % kRows;
    copy[it] = row < n ? head[size_t(c0 + i / kRows) * n + row] : T(0);
  }
}

// Stores load_rows<4 KD, THREADS>'s copy of a CTA's rows of every section (channels [0, 4 KD)) to the fused
// forwards' `packed` [4][BH, N, KD], and those of the V sections to v_out [BH][2 KD][N].
template <int KD, int THREADS>
__device__ __forceinline__ void store_fused_rows(const lab::PsaFusedParams& params, int bh, int n0,
                                                 int thread, const float (&copy)[4 * KD * kRows / THREADS]) {
  const int n = params.n;
  const size_t section_elems = size_t(params.batch_heads) * n * KD;
#pragma unroll
  for (int it = 0; it < 4 * KD * kRows / THREADS; ++it) {
    const int i = thread + it * THREADS, ch = i / kRows, row = n0 + i % kRows, section = ch / KD;
    if (row >= n) continue;
    params.packed[section * section_elems + (size_t(bh) * n + row) * KD + ch % KD] = copy[it];
    if (section >= 2) params.v_out[(size_t(bh) * 2 * KD + ch - 2 * KD) * n + row] = copy[it];
  }
}
// A 16-bit kernel's whole attention for this warp: Q rows n0 + g, n0 + g + 8, then attend_half over its range
// of WARPS, the NCHW planes' fragments loaded in each step (HOIST false: psa_attention_half's reasons).
template <int DT, bool FAST, int CH, int WARPS, int KD, int NT>
__device__ __forceinline__ void attend_half_nchw(const NchwHalfHead<KD>& src, int n0, int warp, int g, int t,
                                                 float scale, WarpState<NT>& w) {
  constexpr int KS = KD / 16;
  uint32_t q[KS][4];
  src.query(n0, g, t, q);
  auto load = [&](int tile0, uint32_t(&kf)[2 * CH][KS][2], uint32_t(&vf)[CH][NT][2]) {
    src.fragments(tile0, g, t, kf, vf);
  };
  attend_half<DT, FAST, CH, false, WARPS>(q, src.n, warp, t, scale, load, w);
}

// The same on NHWC views (token(row): nhwc_query, nhwc_fragments), the first step's loads hoisted.
template <int DT, bool FAST, int CH, int WARPS, int KD, int NT, class Token>
__device__ __forceinline__ void attend_half_nhwc(const Token& token, int n, int n0, int warp, int g, int t,
                                                 float scale, WarpState<NT>& w) {
  constexpr int KS = KD / 16;
  uint32_t q[KS][4];
  nhwc_query<KD>(token, n, n0, g, t, q);
  auto load = [&](int tile0, uint32_t(&kf)[2 * CH][KS][2], uint32_t(&vf)[CH][NT][2]) {
    nhwc_fragments<KD>(token, n, tile0, g, t, kf, vf);
  };
  attend_half<DT, FAST, CH, true, WARPS>(q, n, warp, t, scale, load, w);
}

// The row merge of psa_tc_w16.cu's kernels and psa_attention_half_nhwc_staged: WARPS warps' partial states
// meet in shared memory, outputs by value channel, and 16 threads a row merge them (kMergeGroup x kRows =
// 256 threads) without recomputing a row's statistics per value (psa_tc_w16.cu's header comment).
constexpr int kMergeGroup = 16;

// Every warp's partial outputs by value channel, maxima and sums (lab::psa_row_merge_bytes).
template <int VD, int WARPS>
struct RowMergeShared {
  static_assert(WARPS <= kMergeGroup, "one merging thread a warp");
  static constexpr int kLd = VD + lab::kPsaRowMergePad;
  float acc[WARPS][kRows][kLd];
  float m[WARPS][kRows];
  float l[WARPS][kRows];
};

// Leaves this warp's state in `sh`: accumulator column 8 nt + c (rows g, g + 8) at value channel
// channel(col).
template <int VD, int WARPS, int NT, class Channel>
__device__ __forceinline__ void publish_channels(const WarpState<NT>& w, RowMergeShared<VD, WARPS>& sh,
                                                 int warp, int lane, Channel channel) {
  publish_state(w, sh, warp, lane, [&](int row, int col, float v0, float v1) {
    sh.acc[warp][row][channel(col)] = v0;
    sh.acc[warp][row][channel(col + 1)] = v1;
  });
}

// PW floats at p (16-byte aligned for 4, 8-byte for 2).
template <int PW>
__device__ __forceinline__ void load_floats(const float* p, float (&v)[PW]) {
  static_assert(PW == 2 || PW == 4, "a merge piece of 2 or 4 channels");
  if constexpr (PW == 4) {
    const float4 x = *reinterpret_cast<const float4*>(p);
    v[0] = x.x, v[1] = x.y, v[2] = x.z, v[3] = x.w;
  } else {
    const float2 x = *reinterpret_cast<const float2*>(p);
    v[0] = x.x, v[1] = x.y;
  }
}

// Run by the 256 first threads after the barrier: thread (r = x / 16, j = x % 16) takes warp j's maximum and
// sum (none for j >= WARPS) and merges channels [PW j, PW j + PW) of row r over the warps: store(row, c0,
// values, lse, first) for rows below N (lse: the row's natural-log logsumexp; first: j == 0, one thread a
// row).
template <int VD, int WARPS, class Store>
__device__ __forceinline__ void merge_rows(const RowMergeShared<VD, WARPS>& sh, int n, int n0, Store store) {
  constexpr int PW = VD / kMergeGroup;
  const int r = threadIdx.x / kMergeGroup, j = threadIdx.x % kMergeGroup;
  const float m_j = j < WARPS ? sh.m[j][r] : kMasked;
  float m_all = m_j;
#pragma unroll
  for (int offset = 1; offset < kMergeGroup; offset *= 2)
    m_all = fmaxf(m_all, __shfl_xor_sync(LAB_FULL_MASK, m_all, offset));
  const float e_j = exp2f(m_j - m_all);  // 0 for a warp without keys (m_j = kMasked)
  float l_all = j < WARPS ? sh.l[j][r] * e_j : 0.f;
#pragma unroll
  for (int offset = 1; offset < kMergeGroup; offset *= 2)
    l_all += __shfl_xor_sync(LAB_FULL_MASK, l_all, offset);
  const float weight_j = e_j / l_all;
  float value[PW] = {};
#pragma unroll
  for (int w = 0; w < WARPS; ++w) {
    const float weight = __shfl_sync(LAB_FULL_MASK, weight_j, w, kMergeGroup);
    float part[PW];
    load_floats(&sh.acc[w][r][PW * j], part);
#pragma unroll
    for (int k = 0; k < PW; ++k) value[k] += weight * part[k];
  }
  if (n0 + r < n) store(n0 + r, PW * j, value, m_all * kLn2 + logf(l_all), j == 0);
}

// PW values rounded to DT, packed into PW / 2 words.
template <int DT, int PW>
__device__ __forceinline__ void store_packed(uint16_t* p, const float (&v)[PW]) {
  if constexpr (PW == 4)
    *reinterpret_cast<uint2*>(p) = uint2{lab_pack2<DT>(v[0], v[1]), lab_pack2<DT>(v[2], v[3])};
  else
    *reinterpret_cast<uint32_t*>(p) = lab_pack2<DT>(v[0], v[1]);
}
}  // namespace psa_tc
