// psa_tc: YOLO26's PSA attention core on tensor cores, one launch per forward (layouts as in psa.cu: qkv
// [B, nh*4*KD, H, W] with per head the channels [Q | K | V_lo | V_hi], merged and v_out [B, nh*2*KD, H, W]).
//   psa_attention_fused_tc<KD>      float32 qkv, 3xTF32 mma.sync m16n8k8: the `fused_tc` variant of
//                                   psa_attention, with the `fused` variant's outputs and workspace.
//   psa_attention_half<KD, DT>      fp16 / bf16 qkv (LAB_F16 / LAB_BF16), mma.sync m16n8k16 with float
//                                   accumulation: merged and v_out in the same 16-bit type, L in float.
//   psa_attention_half_nhwc<KD, DT> the same on NHWC views with pitches (wide loads of a token's channels;
//                                   its comment says which orders change).
// KD is 16 or 32 (YOLO26 uses 32); the value width is VD = 2 KD, both halves on the same scores.
//
// Work split (both kernels). One CTA of 8 warps owns 16 query rows (one mma M tile) of one head: grid
// (ceil(N / 16), BH), 50 CTAs at yolo26n size (N 400, BH 2). The warps split the head's KEYS in contiguous
// ranges of key tiles (8 keys per tile in tf32, 16 in 16-bit; at N 400 six or seven tf32 tiles, three or
// four 16-bit tiles per warp) and each runs an online softmax over its range, CH = 4 tiles per step (two
// steps at N 400 in tf32, one in 16 bits), every K and V load of a step issued before its first product: the
// scores S = Q K^T of the step on tensor cores (the accumulator rows g and g + 8 of lane 4g + t), the step's
// row maximum over the quad (two shuffles), exp2 in the log2 domain, then O += P V on tensor cores with P
// taken straight from the score accumulators. The warps' partial states (max, sum, 16 x VD outputs) meet in
// shared memory and the CTA rescales them to the common maximum and writes the outputs, as
// psa_attention_fused does.
//   Why this shape: the `fused` kernel (8 rows per CTA, FMAs and 256 shuffles per lane per 32-key chunk) is
//   latency-bound. Here a warp's dependent chain per step is one global round trip for its K and V
//   fragments (issued together, straight into registers in the mma layouts: no shared staging and no
//   barrier before the merge), KD / 8 (KD / 16) dependent mma for the scores, two shuffles and an exp2, then
//   CH dependent mma per value tile, the VD / 8 value tiles independent. At yolo26n size a CTA does
//   16 x 400 x 96 MACs in 3xTF32 = 3 x 50 x (4 + 8) = 1800 m16n8k8 (225 per warp, two steps), or 25 x
//   (2 x 2 + 8) = 300 m16n8k16 (about 38 per warp) in 16 bits, on one SM each.
//   The operand layouts: S = Q K^T reads Q as the row-major A operand and K^T as B (channel-major qkv: a
//   warp's load of one channel is 8 consecutive keys). For P V, the S accumulator of lane (g, t) holds keys
//   2t and 2t + 1 of its tile; tf32's A operand wants columns t and t + 4, so A's column t stands for key 2t
//   and column t + 4 for key 2t + 1, and V's B rows are read in the same order (the sum over keys does not
//   care); in 16 bits two adjacent 8-key score tiles are exactly the m16n8k16 A operand.
// Float32 accuracy (3xTF32, lab_mma.cuh): every operand is split into tf32 hi + lo and a product is hi hi +
// hi lo + lo hi, about 2^-21 relative per product; the softmax runs in float32 with exp2f as `fused` does.
#include "common/lab.cuh"
#include "common/lab_mma.cuh"
#include "common/lab_grid_dependency.cuh"
#include "attention/psa_params.cuh"

namespace psa_tc {
constexpr int kRows = 16;  // query rows per CTA: one mma M tile
constexpr int kWarps = 8;  // each walks its own range of key tiles
constexpr int kThreads = 32 * kWarps;
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

// One online-softmax step over CH score tiles s[j] (m16n8 accumulators, log2 domain, masked keys at kMasked):
// updates the max, rescales the sum and the outputs, and turns s into the probabilities exp2(s - max).
template <int CH, int NT>
__device__ __forceinline__ void softmax_step(float (&s)[CH][4], WarpState<NT>& w) {
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    float mx = w.m[h];
#pragma unroll
    for (int j = 0; j < CH; ++j) mx = fmaxf(mx, fmaxf(s[j][2 * h], s[j][2 * h + 1]));
    const float m_new = lab_group4_max(mx), alpha = exp2f(w.m[h] - m_new);
    float sum = 0.f;
#pragma unroll
    for (int j = 0; j < CH; ++j) {
      s[j][2 * h] = exp2f(s[j][2 * h] - m_new);
      s[j][2 * h + 1] = exp2f(s[j][2 * h + 1] - m_new);
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
template <int DT, int CH, int KS, int NT>
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
  softmax_step(s, w);
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

// Shared memory of the merge: every warp's partial outputs [warp][row][VD + 8] (the pad keeps a warp's float2
// stores conflict-free), maxima and sums [warp][row].
template <int VD>
struct alignas(16) MergeShared {
  static constexpr int kLd = VD + 8;
  float acc[kWarps][kRows][kLd];
  float m[kWarps][kRows];
  float l[kWarps][kRows];
};

// Leaves this warp's state in `sh` (rows g, g + 8; columns 8 nt + 2t, + 1).
template <int VD, int NT>
__device__ __forceinline__ void publish(const WarpState<NT>& w, MergeShared<VD>& sh, int warp, int lane) {
  const int g = lane / 4, t = lane % 4;
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const int row = g + 8 * h;
    const float l_row = lab_group4_sum(w.l[h]);
#pragma unroll
    for (int nt = 0; nt < NT; ++nt)
      *reinterpret_cast<float2*>(&sh.acc[warp][row][8 * nt + 2 * t]) =
          make_float2(w.o[nt][2 * h], w.o[nt][2 * h + 1]);
    if (t == 0) {
      sh.m[warp][row] = w.m[h];
      sh.l[warp][row] = l_row;
    }
  }
}

// Row r's output column `dim` over all warps, rescaled to the common maximum; `lse` its natural-log
// logsumexp.
template <int VD>
__device__ __forceinline__ float merged_value(const MergeShared<VD>& sh, int r, int dim, float& lse) {
  float m_all = kMasked;
#pragma unroll
  for (int w = 0; w < kWarps; ++w) m_all = fmaxf(m_all, sh.m[w][r]);
  float l_all = 0.f, o = 0.f;
#pragma unroll
  for (int w = 0; w < kWarps; ++w) {
    const float weight = exp2f(sh.m[w][r] - m_all);
    l_all += sh.l[w][r] * weight;
    o += sh.acc[w][r][dim] * weight;
  }
  lse = m_all * kLn2 + logf(l_all);
  return o / l_all;
}

// Publishes every warp's state, waits for the CTA, then spreads this CTA's outputs over its threads:
// store(row, dim, value, lse) for each row below N and value column dim (lse: the row's natural-log
// logsumexp).
template <int VD, int NT, class Store>
__device__ __forceinline__ void merge_warps(const WarpState<NT>& w, MergeShared<VD>& sh, int n, int n0,
                                            Store store) {
  publish(w, sh, threadIdx.x / 32, threadIdx.x % 32);
  __syncthreads();
  for (int i = threadIdx.x; i < kRows * VD; i += kThreads) {
    const int r = i % kRows, dim = i / kRows, row = n0 + r;
    if (row >= n) continue;
    float lse;
    const float value = merged_value(sh, r, dim, lse);
    store(row, dim, value, lse);
  }
}

// This CTA's rows of channels [c0, c0 + C) of a head (channel-major, N wide; 0 beyond N): element it of
// thread x is channel c0 + i / 16, row n0 + i % 16 for i = x + 256 it. Loaded at the start, in the first
// round trip with the products' operands, and stored by the kernel at the end.
template <int C, class T>
__device__ __forceinline__ void load_rows(const T* head, int n, int n0, int c0,
                                          T (&copy)[C * kRows / kThreads]) {
#pragma unroll
  for (int it = 0; it < C * kRows / kThreads; ++it) {
    const int i = threadIdx.x + it * kThreads, row = n0 + i % kRows;
    copy[it] = row < n ? head[size_t(c0 + i / kRows) * n + row] : T(0);
  }
}

// This warp's contiguous range [begin, end) of the `tiles` key tiles of a head.
__device__ __forceinline__ void key_tile_range(int tiles, int warp, int& begin, int& end) {
  begin = warp * tiles / kWarps;
  end = (warp + 1) * tiles / kWarps;
}

// The 16-bit kernels' walk over this warp's range of 16-key tiles, CH tiles per step: load(tile0, kf, vf)
// fills the step's K and V fragments, then half_step. HOIST: the first step's loads are issued before the
// loop and each next step's after the current one's products. Loads in the loop body are scheduled by ptxas
// within the body, and it sinks wide V loads behind the step's score products (a second global round trip
// per step); issued in the block before the loop, every load of a warp's only step (N <= 512) precedes its
// first product. The NCHW kernel keeps its loads in the body: its 208 scalar loads already precede the
// products there, and hoisting them costs it 254 registers at KD 32 and spills at KD 16.
template <int DT, int CH, bool HOIST, int KS, int NT, class Load>
__device__ __forceinline__ void attend_half(const uint32_t (&q)[KS][4], int n, int warp, int t, float scale,
                                            Load load, WarpState<NT>& w) {
  const float c_log2 = scale * kLog2e;
  int begin, end;
  key_tile_range((n + 15) / 16, warp, begin, end);
  if constexpr (HOIST) {
    uint32_t kf[2 * CH][KS][2], vf[CH][NT][2];
    if (begin < end) load(begin, kf, vf);
    for (int tile0 = begin; tile0 < end; tile0 += CH) {
      half_step<DT>(q, kf, vf, tile0, end, n, t, c_log2, w);
      if (tile0 + CH < end) load(tile0 + CH, kf, vf);
    }
  } else {
    for (int tile0 = begin; tile0 < end; tile0 += CH) {
      uint32_t kf[2 * CH][KS][2], vf[CH][NT][2];
      load(tile0, kf, vf);
      half_step<DT>(q, kf, vf, tile0, end, n, t, c_log2, w);
    }
  }
}
}  // namespace psa_tc

// psa_attention_fused_tc<KD> (variant `fused_tc` of psa_attention): float32 qkv; writes merged, v_out, and
// like psa_attention_fused the composed path's workspace: this CTA's rows of every section of `packed`, o_lo,
// o_hi and L, so the attention maps and the FA2 backward run on it unchanged. Block 256, grid (ceil(N / 16),
// BH), 8-key tiles, CH = 4 tiles per softmax step; static shared memory: the merge (37 KB at KD 32).
template <int KD>
__global__ void __launch_bounds__(psa_tc::kThreads) psa_attention_fused_tc(const lab::PsaFusedParams params) {
  constexpr int VD = 2 * KD, KS = KD / 8, NT = VD / 8, CH = 4, QB = psa_tc::kRows;
  static_assert(KD == 16 || KD == 32, "the tensor-core PSA forward is instantiated for KEY_DIM 16 and 32");
  const float* __restrict__ qkv = params.qkv;
  const int n = params.n, bh = blockIdx.y, n0 = blockIdx.x * QB;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
  const float* head = qkv + size_t(bh) * 4 * KD * n;  // channels [Q | K | V_lo | V_hi], each KD x N
  __shared__ psa_tc::MergeShared<VD> sh;

  // This CTA's rows of every section, for `packed` and v_out (load_rows).
  constexpr int kCopies = 4 * KD * QB / psa_tc::kThreads;
  float copy[kCopies];
  psa_tc::load_rows<4 * KD>(head, n, n0, 0, copy);

  // Element (row, channel) of a KD x N section, 0 beyond N.
  auto at = [&](int section, int channel, int row) {
    return row < n ? head[size_t(section * KD + channel) * n + row] : 0.f;
  };
  uint32_t q_hi[KS][4], q_lo[KS][4];
#pragma unroll
  for (int ks = 0; ks < KS; ++ks) {
    const int c = 8 * ks + t;
    const float a[4] = {at(0, c, n0 + g), at(0, c, n0 + g + 8), at(0, c + 4, n0 + g),
                        at(0, c + 4, n0 + g + 8)};
#pragma unroll
    for (int i = 0; i < 4; ++i) lab_split_tf32(a[i], q_hi[ks][i], q_lo[ks][i]);
  }

  const float c_log2 = params.scale * psa_tc::kLog2e;
  psa_tc::WarpState<NT> w;
  int begin, end;
  psa_tc::key_tile_range((n + 7) / 8, warp, begin, end);
  for (int tile0 = begin; tile0 < end; tile0 += CH) {
    // The step's K and V fragments, every load issued before the first product (one round trip per step).
    // A tile past the warp's range loads the next warp's keys, masked below; past N the loads give 0.
    float kf[CH][KS][2], vf[CH][NT][2];
#pragma unroll
    for (int j = 0; j < CH; ++j) {
      const int key0 = (tile0 + j) * 8;
#pragma unroll
      for (int ks = 0; ks < KS; ++ks) {
        kf[j][ks][0] = at(1, 8 * ks + t, key0 + g);
        kf[j][ks][1] = at(1, 8 * ks + t + 4, key0 + g);
      }
#pragma unroll
      for (int nt = 0; nt < NT; ++nt) {  // B rows t and t + 4: keys 2t and 2t + 1 (header comment)
        vf[j][nt][0] = at(2, 8 * nt + g, key0 + 2 * t);
        vf[j][nt][1] = at(2, 8 * nt + g, key0 + 2 * t + 1);
      }
    }
    float s[CH][4];
#pragma unroll
    for (int j = 0; j < CH; ++j) {
      const int key0 = (tile0 + j) * 8;
#pragma unroll
      for (int i = 0; i < 4; ++i) s[j][i] = 0.f;
      if (tile0 + j < end) {  // warp-uniform
#pragma unroll
        for (int ks = 0; ks < KS; ++ks) {
          uint32_t b_hi[2], b_lo[2];
          lab_split_tf32(kf[j][ks][0], b_hi[0], b_lo[0]);
          lab_split_tf32(kf[j][ks][1], b_hi[1], b_lo[1]);
          lab_mma_1688_3xtf32(s[j], q_hi[ks], q_lo[ks], b_hi, b_lo);
        }
      }
#pragma unroll
      for (int i = 0; i < 4; ++i)
        s[j][i] = tile0 + j < end && key0 + 2 * t + i % 2 < n ? s[j][i] * c_log2 : psa_tc::kMasked;
    }
    psa_tc::softmax_step(s, w);
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

  psa_tc::merge_warps(w, sh, n, n0, [&](int row, int dim, float value, float lse) {
    (dim < KD ? params.o_lo : params.o_hi)[(size_t(bh) * n + row) * KD + dim % KD] = value;
    params.merged[(size_t(bh) * VD + dim) * n + row] = value;
    if (dim == 0) params.lse[size_t(bh) * n + row] = lse;
  });
  const size_t section_elems = size_t(params.batch_heads) * n * KD;
#pragma unroll
  for (int it = 0; it < kCopies; ++it) {
    const int i = threadIdx.x + it * psa_tc::kThreads, ch = i / QB, row = n0 + i % QB, section = ch / KD;
    if (row >= n) continue;
    params.packed[section * section_elems + (size_t(bh) * n + row) * KD + ch % KD] = copy[it];
    if (section >= 2) params.v_out[(size_t(bh) * VD + ch - 2 * KD) * n + row] = copy[it];
  }
}

// psa_attention_half<KD, DT>: the same attention on 16-bit qkv (DT = LAB_F16 or LAB_BF16), the products
// m16n8k16 with float accumulation, P rounded to DT before P V (as flash_attn2_mma.cu). Writes merged and
// v_out in DT and L in float. Block 256, grid (ceil(N / 16), BH), 16-key tiles (two 8-key score tiles),
// CH = 4 tiles per softmax step (one step per warp up to N = 512); static shared memory: the merge (37 KB at
// KD 32).
template <int KD, int DT>
__global__ void __launch_bounds__(psa_tc::kThreads) psa_attention_half(const lab::PsaHalfParams params) {
  constexpr int VD = 2 * KD, KS = KD / 16, NT = VD / 8, CH = 4, QB = psa_tc::kRows;
  static_assert(KD == 16 || KD == 32, "the 16-bit PSA forward is instantiated for KEY_DIM 16 and 32");
  const uint16_t* __restrict__ qkv = params.qkv;
  const int n = params.n, bh = blockIdx.y, n0 = blockIdx.x * QB;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
  const uint16_t* head = qkv + size_t(bh) * 4 * KD * n;
  __shared__ psa_tc::MergeShared<VD> sh;

  // This CTA's rows of V, for v_out (load_rows).
  constexpr int kCopies = 2 * KD * QB / psa_tc::kThreads;
  uint16_t copy[kCopies];
  psa_tc::load_rows<2 * KD>(head, n, n0, 2 * KD, copy);

  // Elements (channel, row) and (channel2, row2) of the sections, 0 beyond N, packed low then high.
  auto at = [&](int section, int channel, int row) -> uint32_t {
    return row < n ? head[size_t(section * KD + channel) * n + row] : 0u;
  };
  auto pair = [&](int section, int channel, int row, int channel2, int row2) {
    return at(section, channel, row) | at(section, channel2, row2) << 16;
  };
  uint32_t q[KS][4];
#pragma unroll
  for (int ks = 0; ks < KS; ++ks) {
    const int c = 16 * ks + 2 * t;
    q[ks][0] = pair(0, c, n0 + g, c + 1, n0 + g);
    q[ks][1] = pair(0, c, n0 + g + 8, c + 1, n0 + g + 8);
    q[ks][2] = pair(0, c + 8, n0 + g, c + 9, n0 + g);
    q[ks][3] = pair(0, c + 8, n0 + g + 8, c + 9, n0 + g + 8);
  }

  // The step's K and V fragments. Score tiles 2j and 2j + 1 are the two 8-key halves of 16-key tile j.
  psa_tc::WarpState<NT> w;
  auto load = [&](int tile0, uint32_t(&kf)[2 * CH][KS][2], uint32_t(&vf)[CH][NT][2]) {
#pragma unroll
    for (int j = 0; j < 2 * CH; ++j) {
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
  };
  psa_tc::attend_half<DT, CH, false>(q, n, warp, t, params.scale, load, w);

  psa_tc::merge_warps(w, sh, n, n0, [&](int row, int dim, float value, float lse) {
    params.merged[(size_t(bh) * VD + dim) * n + row] = uint16_t(lab_pack2<DT>(value, 0.f) & 0xffffu);
    if (dim == 0) params.lse[size_t(bh) * n + row] = lse;
  });
#pragma unroll
  for (int it = 0; it < kCopies; ++it) {
    const int i = threadIdx.x + it * psa_tc::kThreads, row = n0 + i % QB;
    if (row < n) params.v_out[(size_t(bh) * VD + i / QB) * n + row] = copy[it];
  }
}

namespace psa_tc {
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
}  // namespace psa_tc

// psa_attention_half_nhwc<KD, DT>: psa_attention_half on NHWC views with pitches (PsaHalfNhwcParams): the
// same work split, steps and merge; only the loads and stores differ. A key's (or query's) channels are
// contiguous, so each fragment comes from wide loads of row pieces, and the orders the sums do not care
// about are chosen to make the pieces contiguous:
//   Q and K (the KD sum): lane (g, t) loads channels [t KD / 4, (t + 1) KD / 4) of its rows (one 16-byte
//     load at KD 32, 8 bytes at KD 16), and the 32-bit word 2 ks + i of the piece plays the mma k pair of
//     register i (A: registers 0 / 2, B: 0 / 1) of k step ks; Q and K share the order, so S is the same dot
//     product, summed in another order.
//   V (the value columns): the B column g of value tile nt is value channel g NT + nt, so lane (g, t) loads
//     channels [g NT, (g + 1) NT) of keys 2t, 2t + 1, 2t + 8, 2t + 9 (four wide loads per 16-key tile) and
//     pairs the keys' halves; output column 8 nt + c is then value channel c NT + nt, undone at the store.
// The first step's loads are issued before the key-tile loop (attend_half's HOIST: one round trip per
// warp at N <= 512). merged and v_out are written 4 channels (8 bytes) per thread, a row's channels by
// consecutive threads. Block 256, grid (ceil(N / 16), BH); static shared memory: the merge.
template <int KD, int DT>
__global__ void __launch_bounds__(psa_tc::kThreads)
    psa_attention_half_nhwc(const lab::PsaHalfNhwcParams params) {
  constexpr int VD = 2 * KD, KS = KD / 16, NT = VD / 8, CH = 4, QB = psa_tc::kRows, W = KD / 8;
  static_assert(KD == 16 || KD == 32, "the 16-bit PSA forward is instantiated for KEY_DIM 16 and 32");
  const int n = params.n, bh = blockIdx.y, n0 = blockIdx.x * QB, b = bh / params.heads, h = bh % params.heads;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
  // Token `row` of this head: channels [Q | K | V] from its first.
  auto token = [&](int row) { return params.qkv + (size_t(b) * n + row) * params.qkv_pitch + h * 4 * KD; };
  __shared__ psa_tc::MergeShared<VD> sh;
  // Programmatic Dependent Launch: every load of qkv and store comes after the previous launch's completion;
  // the next launch may start at once (its CTAs take only room this grid leaves free).
  lab_grid_dependency_wait();
  lab_launch_dependents();

  // This CTA's rows of V, for v_out: piece i is row i / (VD / 4), channels 4 (i % (VD / 4)) .. + 3.
  constexpr int kPieces = QB * VD / 4, kCopies = (kPieces + psa_tc::kThreads - 1) / psa_tc::kThreads;
  uint32_t copy[kCopies][2];
#pragma unroll
  for (int it = 0; it < kCopies; ++it) {
    const int i = threadIdx.x + it * psa_tc::kThreads, row = n0 + i / (VD / 4);
    psa_tc::load_words(token(row) + 2 * KD + 4 * (i % (VD / 4)), i < kPieces && row < n, copy[it]);
  }

  uint32_t q[KS][4];
  {
    uint32_t lo[W], hi[W];  // rows g and g + 8
    psa_tc::load_words(token(n0 + g) + t * W * 2, n0 + g < n, lo);
    psa_tc::load_words(token(n0 + g + 8) + t * W * 2, n0 + g + 8 < n, hi);
#pragma unroll
    for (int ks = 0; ks < KS; ++ks) {
      q[ks][0] = lo[2 * ks], q[ks][1] = hi[2 * ks], q[ks][2] = lo[2 * ks + 1], q[ks][3] = hi[2 * ks + 1];
    }
  }

  psa_tc::WarpState<NT> w;
  auto load = [&](int tile0, uint32_t(&kf)[2 * CH][KS][2], uint32_t(&vf)[CH][NT][2]) {
#pragma unroll
    for (int j = 0; j < 2 * CH; ++j) {
      const int key = (tile0 + j / 2) * 16 + (j % 2) * 8 + g;
      uint32_t piece[W];
      psa_tc::load_words(token(key) + KD + t * W * 2, key < n, piece);
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
        psa_tc::load_words(token(row) + 2 * KD + g * NT, row < n, v[k]);
      }
#pragma unroll
      for (int nt = 0; nt < NT; ++nt) {
        vf[j][nt][0] = psa_tc::pair_halves(v[0], v[1], nt);
        vf[j][nt][1] = psa_tc::pair_halves(v[2], v[3], nt);
      }
    }
  };
  psa_tc::attend_half<DT, CH, true>(q, n, warp, t, params.scale, load, w);

  psa_tc::publish(w, sh, warp, lane);
  __syncthreads();
#pragma unroll
  for (int it = 0; it < kCopies; ++it) {
    const int i = threadIdx.x + it * psa_tc::kThreads, r = i / (VD / 4), c0 = 4 * (i % (VD / 4)),
              row = n0 + r;
    if (i >= kPieces || row >= n) continue;
    const size_t pixel = size_t(b) * n + row;
    float value[4], lse;  // the row's merge, redone per value (cheap next to the attention)
#pragma unroll
    for (int k = 0; k < 4; ++k)
      value[k] = psa_tc::merged_value(sh, r, 8 * ((c0 + k) % NT) + (c0 + k) / NT, lse);
    *reinterpret_cast<uint2*>(params.merged + pixel * params.merged_pitch + h * VD + c0) =
        uint2{lab_pack2<DT>(value[0], value[1]), lab_pack2<DT>(value[2], value[3])};
    *reinterpret_cast<uint2*>(params.v_out + pixel * params.v_pitch + h * VD + c0) =
        uint2{copy[it][0], copy[it][1]};
    if (c0 == 0) params.lse[size_t(bh) * n + row] = lse;
  }
}
