// psa: the data rearrangements YOLO26's PSA attention needs around Flash Attention 2, and their backward.
//
// Layouts (row-major, contiguous; KD = KEY_DIM, nh = NUM_HEADS, BH = B * nh, N = H * W, c = nh * 2 * KD):
//   qkv      [B, nh * 4 * KD, H, W]   the qkv conv's NCHW output; per head the channels are [Q | K | V_lo |
//   V_hi],
//                                     each KD wide (Ultralytics: q, k of key_dim, v of head_dim = 2 *
//                                     key_dim)
//   packed   [4, BH, N, KD]           section s = 0 Q, 1 K, 2 V_lo, 3 V_hi; what Flash Attention 2 reads
//   v_out    [B, c, H, W]             the V channels of every head in NCHW (input of the `pe` depthwise conv)
//   o_lo/hi  [BH, N, KD]              the two Flash Attention 2 outputs (values V_lo, V_hi)
//   merged   [B, c, H, W]             per head the channels [lo | hi], i.e. (v @ attn^T).view(B, c, H, W)
//   grads    [2, 3, BH, N, KD]        backward: per pass (lo, hi) the Flash Attention 2 gradients dQ, dK, dV
//   d_qkv    [B, nh * 4 * KD, H, W]   dQ = dQ_lo + dQ_hi, dK = dK_lo + dK_hi, dV_lo/hi plus the gradient of
//   v_out
// Kernels (one variant each, `v1`): the NCHW <-> [.., N, KD] transposes go through a 32 x 33 shared tile so
// both the channel-major reads and the row-major writes are coalesced. Block (32, 8); grid (ceil(N/32),
// ceil(KD/32), sections): psa_pack_qkv (sections = BH * 4), psa_merge_attn and psa_merge_attn_bwd
// (BH * 2), psa_qkv_grad (BH * 4). psa_extract_v is a plain channel gather: block 256, grid
// ceil(B * c * N / 256). Nothing is saved: the backward needs only the forward's Flash Attention 2 outputs.
// psa_pack_qkv_half<DT>, psa_merge_attn_half<DT>, psa_merge_attn_bwd_half<DT> and psa_qkv_grad_half<DT> are
// the same four around 16-bit Flash Attention passes (flash_attn2_mma.cu): packed, o_lo / o_hi, do_lo / do_hi
// and grads in DT (LAB_F16, LAB_BF16), rounded to nearest even where written; the NCHW side stays float.
// psa_attention_fused<KD> (end of file) is the composed forward's `fused` variant: everything in one launch.
// Each kernel takes its parameter struct (psa_params.cuh) by value.
#include "common/lab.cuh"
#include "common/lab_mma.cuh"
#include "attention/psa_params.cuh"

namespace psa {

constexpr int kTile = 32;
constexpr int kRowsPerPass = 8;  // blockDim.y

// The element of the Flash Attention side (packed, o_lo / o_hi, do_lo / do_hi, grads): float, or a 16-bit
// pattern of DT (LAB_F16, LAB_BF16) rounded to nearest even, for the 16-bit passes. The NCHW side (qkv,
// merged, d_merged, d_v, d_qkv) is float either way.
struct FloatElement {
  using T = float;
  static __device__ __forceinline__ float load(float v) { return v; }
  static __device__ __forceinline__ float store(float v) { return v; }
};
template <int DT>
struct HalfElement {
  using T = uint16_t;
  static __device__ __forceinline__ float load(uint16_t bits) { return lab_to_float<DT>(bits); }
  static __device__ __forceinline__ uint16_t store(float v) {
    return uint16_t(lab_pack2<DT>(v, 0.f) & 0xffffu);
  }
};

using Tile = float[kTile][kTile + 1];

// Copies a kTile (channels) x kTile (positions) block of a channel-major [channels, n] source into
// tile[channel][position] (coalesced over positions). Out-of-range entries are left untouched.
__device__ __forceinline__ void load_channel_major(const float* src, int n, int n0, int channels, int c0,
                                                   Tile& tile) {
  const int pos = n0 + threadIdx.x;
  for (int r = threadIdx.y; r < kTile; r += kRowsPerPass)
    if (c0 + r < channels && pos < n) tile[r][threadIdx.x] = src[size_t(c0 + r) * n + pos];
}

// Copies a block of a row-major [n, channels] source of E's elements into tile[channel][position] (coalesced
// over channels).
template <class E>
__device__ __forceinline__ void load_row_major(const typename E::T* src, int n, int n0, int channels, int c0,
                                               Tile& tile) {
  const int ch = c0 + threadIdx.x;
  for (int r = threadIdx.y; r < kTile; r += kRowsPerPass)
    if (n0 + r < n && ch < channels) tile[threadIdx.x][r] = E::load(src[size_t(n0 + r) * channels + ch]);
}

// Writes tile[channel][position] to a row-major [n, channels] destination of E's elements (coalesced over
// channels).
template <class E>
__device__ __forceinline__ void store_row_major(const Tile& tile, int n, int n0, int channels, int c0,
                                                typename E::T* dst) {
  const int ch = c0 + threadIdx.x;
  for (int r = threadIdx.y; r < kTile; r += kRowsPerPass)
    if (n0 + r < n && ch < channels) dst[size_t(n0 + r) * channels + ch] = E::store(tile[threadIdx.x][r]);
}

// qkv [B, nh*4*KD, H, W] -> packed [4, BH, N, KD]. Grid z = BH * 4 (bh-major, section-minor).
template <class E>
__device__ __forceinline__ void pack_qkv(const float* qkv, typename E::T* packed, int batch_heads,
                                         int key_dim, int n, Tile& tile) {
  const int bh = blockIdx.z / 4, section = blockIdx.z % 4;
  const int n0 = blockIdx.x * kTile, c0 = blockIdx.y * kTile;
  // Head bh's channels start at bh * 4 * KD in the [B * nh * 4 * KD, N] view of qkv.
  load_channel_major(qkv + (size_t(bh) * 4 + section) * key_dim * n, n, n0, key_dim, c0, tile);
  __syncthreads();
  store_row_major<E>(tile, n, n0, key_dim, c0, packed + (size_t(section) * batch_heads + bh) * n * key_dim);
}

// o_lo, o_hi [BH, N, KD] -> merged [B, nh*2*KD, H, W]. Grid z = BH * 2 (bh-major, half-minor).
template <class E>
__device__ __forceinline__ void merge_attn(const typename E::T* o_lo, const typename E::T* o_hi,
                                           float* merged, int key_dim, int n, Tile& tile) {
  const int bh = blockIdx.z / 2, half = blockIdx.z % 2;
  const int n0 = blockIdx.x * kTile, c0 = blockIdx.y * kTile;
  load_row_major<E>((half ? o_hi : o_lo) + size_t(bh) * n * key_dim, n, n0, key_dim, c0, tile);
  __syncthreads();
  float* dst = merged + (size_t(bh) * 2 + half) * key_dim * n;
  const int pos = n0 + threadIdx.x;
  for (int r = threadIdx.y; r < kTile; r += kRowsPerPass)
    if (c0 + r < key_dim && pos < n) dst[size_t(c0 + r) * n + pos] = tile[r][threadIdx.x];
}

// The merge backward: d_merged [B, nh*2*KD, H, W] -> do_lo, do_hi [BH, N, KD]. Grid z = BH * 2.
template <class E>
__device__ __forceinline__ void merge_attn_bwd(const float* d_merged, typename E::T* do_lo,
                                               typename E::T* do_hi, int key_dim, int n, Tile& tile) {
  const int bh = blockIdx.z / 2, half = blockIdx.z % 2;
  const int n0 = blockIdx.x * kTile, c0 = blockIdx.y * kTile;
  load_channel_major(d_merged + (size_t(bh) * 2 + half) * key_dim * n, n, n0, key_dim, c0, tile);
  __syncthreads();
  store_row_major<E>(tile, n, n0, key_dim, c0, (half ? do_hi : do_lo) + size_t(bh) * n * key_dim);
}

// The pack / extract-V backward: grads [2, 3, BH, N, KD] (pass lo/hi x dQ, dK, dV) and d_v [B, nh*2*KD, H, W]
// -> d_qkv [B, nh*4*KD, H, W]. Grid z = BH * 4 (bh-major, section-minor).
template <class E>
__device__ __forceinline__ void qkv_grad(const typename E::T* grads, const float* d_v, float* d_qkv,
                                         int batch_heads, int key_dim, int n, Tile& tile_a, Tile& tile_b) {
  const int bh = blockIdx.z / 4, section = blockIdx.z % 4;
  const int n0 = blockIdx.x * kTile, c0 = blockIdx.y * kTile;
  const size_t plane = size_t(batch_heads) * n * key_dim;  // one [BH, N, KD] gradient
  const size_t head = size_t(bh) * n * key_dim;
  // Q and K sum their two passes; V_lo and V_hi take their own pass's dV.
  const typename E::T* first =
      grads + (section < 2 ? size_t(section) : size_t(2 + 3 * (section - 2))) * plane + head;
  load_row_major<E>(first, n, n0, key_dim, c0, tile_a);
  if (section < 2)
    load_row_major<E>(grads + (3 + size_t(section)) * plane + head, n, n0, key_dim, c0, tile_b);
  __syncthreads();
  float* dst = d_qkv + (size_t(bh) * 4 + section) * key_dim * n;
  const float* dv = section < 2 ? nullptr : d_v + (size_t(bh) * 2 + (section - 2)) * key_dim * n;
  const int pos = n0 + threadIdx.x;
  for (int r = threadIdx.y; r < kTile; r += kRowsPerPass) {
    if (c0 + r >= key_dim || pos >= n) continue;
    const size_t at = size_t(c0 + r) * n + pos;
    dst[at] = section < 2 ? tile_a[r][threadIdx.x] + tile_b[r][threadIdx.x] : tile_a[r][threadIdx.x] + dv[at];
  }
}

}  // namespace psa

__global__ void psa_pack_qkv(const lab::PsaSplitQkvParams p) {
  __shared__ psa::Tile tile;
  const float* __restrict__ qkv = p.qkv;
  float* __restrict__ packed = p.out;
  psa::pack_qkv<psa::FloatElement>(qkv, packed, p.batch_heads, p.key_dim, p.n, tile);
}

// qkv [B, nh*4*KD, H, W] -> v_out [B, nh*2*KD, H, W]: the V_lo, V_hi channels of every head, in order.
__global__ void psa_extract_v(const lab::PsaSplitQkvParams p) {
  const float* __restrict__ qkv = p.qkv;
  float* __restrict__ v_out = p.out;
  const int batch_heads = p.batch_heads, key_dim = p.key_dim, n = p.n;
  const size_t per_head = size_t(2) * key_dim * n;
  const size_t idx = size_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (idx >= per_head * batch_heads) return;
  const size_t bh = idx / per_head, within = idx % per_head;
  v_out[idx] = qkv[bh * 2 * per_head + per_head + within];
}

__global__ void psa_merge_attn(const lab::PsaMergeParams p) {
  __shared__ psa::Tile tile;
  const float* __restrict__ o_lo = p.o_lo;
  const float* __restrict__ o_hi = p.o_hi;
  float* __restrict__ merged = p.merged;
  psa::merge_attn<psa::FloatElement>(o_lo, o_hi, merged, p.key_dim, p.n, tile);
}

__global__ void psa_merge_attn_bwd(const lab::PsaMergeBwdParams p) {
  __shared__ psa::Tile tile;
  const float* __restrict__ d_merged = p.d_merged;
  float* __restrict__ do_lo = p.do_lo;
  float* __restrict__ do_hi = p.do_hi;
  psa::merge_attn_bwd<psa::FloatElement>(d_merged, do_lo, do_hi, p.key_dim, p.n, tile);
}

__global__ void psa_qkv_grad(const lab::PsaQkvGradParams p) {
  __shared__ psa::Tile tile_a, tile_b;
  const float* __restrict__ grads = p.grads;
  const float* __restrict__ d_v = p.d_v;
  float* __restrict__ d_qkv = p.d_qkv;
  psa::qkv_grad<psa::FloatElement>(grads, d_v, d_qkv, p.batch_heads, p.key_dim, p.n, tile_a, tile_b);
}

// The same four on 16-bit Flash Attention passes (DT = LAB_F16 or LAB_BF16): packed and do_lo / do_hi written
// rounded to DT, o_lo / o_hi and grads read from DT.
template <int DT>
__global__ void psa_pack_qkv_half(const lab::PsaPackHalfParams p) {
  __shared__ psa::Tile tile;
  psa::pack_qkv<psa::HalfElement<DT>>(p.qkv, p.packed, p.batch_heads, p.key_dim, p.n, tile);
}

template <int DT>
__global__ void psa_merge_attn_half(const lab::PsaMergeHalfParams p) {
  __shared__ psa::Tile tile;
  psa::merge_attn<psa::HalfElement<DT>>(p.o_lo, p.o_hi, p.merged, p.key_dim, p.n, tile);
}

template <int DT>
__global__ void psa_merge_attn_bwd_half(const lab::PsaMergeBwdHalfParams p) {
  __shared__ psa::Tile tile;
  psa::merge_attn_bwd<psa::HalfElement<DT>>(p.d_merged, p.do_lo, p.do_hi, p.key_dim, p.n, tile);
}

template <int DT>
__global__ void psa_qkv_grad_half(const lab::PsaQkvGradHalfParams p) {
  __shared__ psa::Tile tile_a, tile_b;
  psa::qkv_grad<psa::HalfElement<DT>>(p.grads, p.d_v, p.d_qkv, p.batch_heads, p.key_dim, p.n, tile_a, tile_b);
}

namespace psa {
constexpr int kFusedQueries = 8;    // query rows per CTA (100 CTAs at yolo26n size: one wave on an H200)
constexpr int kFusedThreads = 256;  // 8 warps, each walking its own share of the keys
constexpr int kFusedWarps = kFusedThreads / 32;
constexpr float kLog2e = 1.4426950408889634f;
constexpr float kLn2 = 0.6931471805599453f;
constexpr float kMasked = -1.0e30f;  // score of a key beyond N: finite, so exp2f gives 0 and never NaN
}  // namespace psa

// psa_attention_fused<KD> (variant `fused`): the whole PSA forward in one launch for YOLO26's small maps,
// instead of pack -> FA2(V_lo) -> FA2(V_hi) -> merge -> extract-V. Both passes share the scores, so one
// online softmax accumulates the 2*KD value columns [V_lo | V_hi] together. Grid (ceil(N / 8), BH), block
// 256: a CTA owns 8 query rows of one head and splits the KEYS over its 8 warps (at N = 400 a row's serial
// walk is two 32-key chunks instead of 400 keys), then merges the warps' partial softmax states in shared
// memory.
//   Warp w takes the 32-key chunks w, w + 8, ...; lane j owns key j of a chunk: its KD key values go global
//   -> registers (channel-major qkv: a warp's loads of one channel are 32 consecutive keys), the chunk's 2KD
//   x 32 values go to the warp's own shared tile (padded to 33, conflict-free), and for each of the CTA's
//   rows the lane scores its key against Q (shared, broadcast); the row max reduces over the warp (the
//   running max is warp-uniform), the exponent sums stay per lane, and each lane accumulates the value
//   columns lane + 32 d with the probabilities broadcast by shuffles. Merge: every warp leaves (max, sum, 2KD
//   partial outputs) per row in shared memory; the CTA rescales them to the common max and writes merged and
//   the two FA2 outputs o_lo / o_hi, and L (natural-log logsumexp, as FA2 writes it). It also writes this
//   CTA's rows of every section of `packed` and of v_out, so the attention maps (probs from packed Q, K and
//   L) and the backward (FA2's, reading packed, o_lo, o_hi, L) work on a fused forward exactly as on the
//   composed one. Dynamic shared memory: each warp's V tile [2KD][33], later reused for the partial results
//   [8 warps][8 rows][2KD + 2]: 8 * 2KD * 33 floats (67.6 KB at KD 32). KD in {16, 32} (YOLO26 uses 32);
//   other widths take the composed path.
template <int KD>
__global__ void __launch_bounds__(psa::kFusedThreads)
    psa_attention_fused(const lab::PsaFusedParams params) {
  const float* __restrict__ qkv = params.qkv;
  float* __restrict__ merged = params.merged;
  float* __restrict__ v_out = params.v_out;
  float* __restrict__ packed = params.packed;
  float* __restrict__ o_lo = params.o_lo;
  float* __restrict__ o_hi = params.o_hi;
  float* __restrict__ lse = params.lse;
  const int batch_heads = params.batch_heads, n = params.n;
  const float scale = params.scale;
  constexpr int QB = psa::kFusedQueries, W = psa::kFusedWarps, VD = 2 * KD, kDimsPerLane = VD / 32;
  constexpr int kLd = 33;  // row stride of a warp's V tile
  static_assert(KD == 16 || KD == 32, "the fused PSA forward is instantiated for KEY_DIM 16 and 32");
  __shared__ float q_s[QB][KD];
  LAB_DYNAMIC_SHARED(float, smem);
  const int bh = blockIdx.y, n0 = blockIdx.x * QB;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const float* head = qkv + size_t(bh) * 4 * KD * n;  // channels [Q | K | V_lo | V_hi], each KD x N
  const size_t section_elems = size_t(batch_heads) * n * KD;

  // This CTA's query rows: Q into shared memory, every section into `packed`, V into v_out.
  for (int i = threadIdx.x; i < 4 * KD * QB; i += psa::kFusedThreads) {
    const int ch = i / QB, r = i % QB, row = n0 + r, section = ch / KD, c = ch % KD;
    const float v = row < n ? head[size_t(ch) * n + row] : 0.f;
    if (section == 0) q_s[r][c] = v;
    if (row >= n) continue;
    packed[section * section_elems + (size_t(bh) * n + row) * KD + c] = v;
    if (section >= 2) v_out[(size_t(bh) * VD + ch - 2 * KD) * n + row] = v;
  }
  __syncthreads();

  const float c = scale * psa::kLog2e;
  float* v_s = smem + warp * VD * kLd;  // this warp's V chunk, v_s[dim * kLd + key]
  float m[QB], l[QB], acc[QB][kDimsPerLane];
#pragma unroll
  for (int r = 0; r < QB; ++r) {
    m[r] = psa::kMasked;
    l[r] = 0.f;
#pragma unroll
    for (int d = 0; d < kDimsPerLane; ++d) acc[r][d] = 0.f;
  }
  for (int k0 = warp * 32; k0 < n; k0 += W * 32) {
    const int key = k0 + lane;
    const bool valid = key < n;
    float k[KD];
#pragma unroll
    for (int cc = 0; cc < KD; ++cc) k[cc] = valid ? head[size_t(KD + cc) * n + key] : 0.f;
#pragma unroll
    for (int d = 0; d < VD; ++d) v_s[d * kLd + lane] = valid ? head[size_t(2 * KD + d) * n + key] : 0.f;
    __syncwarp();
    float p[QB];
#pragma unroll
    for (int r = 0; r < QB; ++r) {
      float s = 0.f;
#pragma unroll
      for (int cc = 0; cc < KD; ++cc) s += q_s[r][cc] * k[cc];
      s = valid ? s * c : psa::kMasked;
      const float m_new = fmaxf(m[r], lab_warp_max(s)), alpha = exp2f(m[r] - m_new);
      p[r] = exp2f(s - m_new);
      l[r] = l[r] * alpha + p[r];
      m[r] = m_new;
#pragma unroll
      for (int d = 0; d < kDimsPerLane; ++d) acc[r][d] *= alpha;
    }
    for (int j = 0; j < 32; ++j) {
      float v[kDimsPerLane];
#pragma unroll
      for (int d = 0; d < kDimsPerLane; ++d) v[d] = v_s[(lane + 32 * d) * kLd + j];
#pragma unroll
      for (int r = 0; r < QB; ++r) {
        const float pj = __shfl_sync(LAB_FULL_MASK, p[r], j);
#pragma unroll
        for (int d = 0; d < kDimsPerLane; ++d) acc[r][d] += pj * v[d];
      }
    }
    __syncwarp();  // the next chunk overwrites v_s
  }

  // Merge the warps' partial states: part_acc [W][QB][VD], part_m / part_l [W][QB] (over the V tiles).
  __syncthreads();
  float *part_acc = smem, *part_m = smem + W * QB * VD, *part_l = part_m + W * QB;
#pragma unroll
  for (int r = 0; r < QB; ++r) {
    const float l_warp = lab_warp_sum(l[r]);
#pragma unroll
    for (int d = 0; d < kDimsPerLane; ++d) part_acc[(warp * QB + r) * VD + lane + 32 * d] = acc[r][d];
    if (lane == 0) {
      part_m[warp * QB + r] = m[r];
      part_l[warp * QB + r] = l_warp;
    }
  }
  __syncthreads();
  for (int i = threadIdx.x; i < QB * VD; i += psa::kFusedThreads) {
    const int r = i % QB, dim = i / QB, row = n0 + r;
    if (row >= n) continue;
    float m_all = psa::kMasked;
    for (int w = 0; w < W; ++w) m_all = fmaxf(m_all, part_m[w * QB + r]);
    float l_all = 0.f, o = 0.f;
    for (int w = 0; w < W; ++w) {
      const float weight = exp2f(part_m[w * QB + r] - m_all);
      l_all += part_l[w * QB + r] * weight;
      o += part_acc[(w * QB + r) * VD + dim] * weight;
    }
    const float value = o / l_all;
    const int half = dim / KD, cc = dim % KD;
    (half ? o_hi : o_lo)[(size_t(bh) * n + row) * KD + cc] = value;
    merged[(size_t(bh) * VD + dim) * n + row] = value;
    if (dim == 0) lse[size_t(bh) * n + row] = m_all * psa::kLn2 + logf(l_all);
  }
}
