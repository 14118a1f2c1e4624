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
// psa_attention_fused<KD> (end of file) is the composed forward's `fused` variant: everything in one launch.
#include "common/lab.cuh"

namespace psa {

constexpr int kTile = 32;
constexpr int kRowsPerPass = 8;  // blockDim.y

// Copies a kTile (channels) x kTile (positions) block of a channel-major [channels, n] source into
// tile[channel][position] (coalesced over positions). Out-of-range entries are left untouched.
__device__ __forceinline__ void load_channel_major(const float* src, int n, int n0, int channels, int c0,
                                                   float (*tile)[kTile + 1]) {
  const int pos = n0 + threadIdx.x;
  for (int r = threadIdx.y; r < kTile; r += kRowsPerPass)
    if (c0 + r < channels && pos < n) tile[r][threadIdx.x] = src[size_t(c0 + r) * n + pos];
}

// Copies a block of a row-major [n, channels] source into tile[channel][position] (coalesced over channels).
__device__ __forceinline__ void load_row_major(const float* src, int n, int n0, int channels, int c0,
                                               float (*tile)[kTile + 1]) {
  const int ch = c0 + threadIdx.x;
  for (int r = threadIdx.y; r < kTile; r += kRowsPerPass)
    if (n0 + r < n && ch < channels) tile[threadIdx.x][r] = src[size_t(n0 + r) * channels + ch];
}

}  // namespace psa

// qkv [B, nh*4*KD, H, W] -> packed [4, BH, N, KD]. Grid z = BH * 4 (bh-major, section-minor).
extern "C" __global__ void psa_pack_qkv(const float* __restrict__ qkv, float* __restrict__ packed,
                                        int batch_heads, int key_dim, int n) {
  __shared__ float tile[psa::kTile][psa::kTile + 1];
  const int bh = blockIdx.z / 4, section = blockIdx.z % 4;
  const int n0 = blockIdx.x * psa::kTile, c0 = blockIdx.y * psa::kTile;
  // Head bh's channels start at bh * 4 * KD in the [B * nh * 4 * KD, N] view of qkv.
  psa::load_channel_major(qkv + (size_t(bh) * 4 + section) * key_dim * n, n, n0, key_dim, c0, tile);
  __syncthreads();
  float* dst = packed + (size_t(section) * batch_heads + bh) * n * key_dim;
  const int ch = c0 + threadIdx.x;
  for (int r = threadIdx.y; r < psa::kTile; r += psa::kRowsPerPass)
    if (n0 + r < n && ch < key_dim) dst[size_t(n0 + r) * key_dim + ch] = tile[threadIdx.x][r];
}

// qkv [B, nh*4*KD, H, W] -> v_out [B, nh*2*KD, H, W]: the V_lo, V_hi channels of every head, in order.
extern "C" __global__ void psa_extract_v(const float* __restrict__ qkv, float* __restrict__ v_out,
                                         int batch_heads, int key_dim, int n) {
  const size_t per_head = size_t(2) * key_dim * n;
  const size_t idx = size_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (idx >= per_head * batch_heads) return;
  const size_t bh = idx / per_head, within = idx % per_head;
  v_out[idx] = qkv[bh * 2 * per_head + per_head + within];
}

// o_lo, o_hi [BH, N, KD] -> merged [B, nh*2*KD, H, W]. Grid z = BH * 2 (bh-major, half-minor).
extern "C" __global__ void psa_merge_attn(const float* __restrict__ o_lo, const float* __restrict__ o_hi,
                                          float* __restrict__ merged, int key_dim, int n) {
  __shared__ float tile[psa::kTile][psa::kTile + 1];
  const int bh = blockIdx.z / 2, half = blockIdx.z % 2;
  const int n0 = blockIdx.x * psa::kTile, c0 = blockIdx.y * psa::kTile;
  psa::load_row_major((half ? o_hi : o_lo) + size_t(bh) * n * key_dim, n, n0, key_dim, c0, tile);
  __syncthreads();
  float* dst = merged + (size_t(bh) * 2 + half) * key_dim * n;
  const int pos = n0 + threadIdx.x;
  for (int r = threadIdx.y; r < psa::kTile; r += psa::kRowsPerPass)
    if (c0 + r < key_dim && pos < n) dst[size_t(c0 + r) * n + pos] = tile[r][threadIdx.x];
}

// The merge backward: d_merged [B, nh*2*KD, H, W] -> do_lo, do_hi [BH, N, KD]. Grid z = BH * 2.
extern "C" __global__ void psa_merge_attn_bwd(const float* __restrict__ d_merged, float* __restrict__ do_lo,
                                              float* __restrict__ do_hi, int key_dim, int n) {
  __shared__ float tile[psa::kTile][psa::kTile + 1];
  const int bh = blockIdx.z / 2, half = blockIdx.z % 2;
  const int n0 = blockIdx.x * psa::kTile, c0 = blockIdx.y * psa::kTile;
  psa::load_channel_major(d_merged + (size_t(bh) * 2 + half) * key_dim * n, n, n0, key_dim, c0, tile);
  __syncthreads();
  float* dst = (half ? do_hi : do_lo) + size_t(bh) * n * key_dim;
  const int ch = c0 + threadIdx.x;
  for (int r = threadIdx.y; r < psa::kTile; r += psa::kRowsPerPass)
    if (n0 + r < n && ch < key_dim) dst[size_t(n0 + r) * key_dim + ch] = tile[threadIdx.x][r];
}

// The pack / extract-V backward: grads [2, 3, BH, N, KD] (pass lo/hi x dQ, dK, dV) and d_v [B, nh*2*KD, H, W]
// -> d_qkv [B, nh*4*KD, H, W]. Grid z = BH * 4 (bh-major, section-minor).
extern "C" __global__ void psa_qkv_grad(const float* __restrict__ grads, const float* __restrict__ d_v,
                                        float* __restrict__ d_qkv, int batch_heads, int key_dim, int n) {
  __shared__ float tile_a[psa::kTile][psa::kTile + 1];
  __shared__ float tile_b[psa::kTile][psa::kTile + 1];
  const int bh = blockIdx.z / 4, section = blockIdx.z % 4;
  const int n0 = blockIdx.x * psa::kTile, c0 = blockIdx.y * psa::kTile;
  const size_t plane = size_t(batch_heads) * n * key_dim;  // one [BH, N, KD] gradient
  const size_t head = size_t(bh) * n * key_dim;
  // Q and K sum their two passes; V_lo and V_hi take their own pass's dV.
  const float* first = grads + (section < 2 ? size_t(section) : size_t(2 + 3 * (section - 2))) * plane + head;
  psa::load_row_major(first, n, n0, key_dim, c0, tile_a);
  if (section < 2)
    psa::load_row_major(grads + (3 + size_t(section)) * plane + head, n, n0, key_dim, c0, tile_b);
  __syncthreads();
  float* dst = d_qkv + (size_t(bh) * 4 + section) * key_dim * n;
  const float* dv = section < 2 ? nullptr : d_v + (size_t(bh) * 2 + (section - 2)) * key_dim * n;
  const int pos = n0 + threadIdx.x;
  for (int r = threadIdx.y; r < psa::kTile; r += psa::kRowsPerPass) {
    if (c0 + r >= key_dim || pos >= n) continue;
    const size_t at = size_t(c0 + r) * n + pos;
    dst[at] = section < 2 ? tile_a[r][threadIdx.x] + tile_b[r][threadIdx.x] : tile_a[r][threadIdx.x] + dv[at];
  }
}

namespace psa {
constexpr int kFusedQueries = 4;  // query rows per CTA: one per warp (200 CTAs at yolo26n size)
constexpr int kFusedKeys = 64;     // keys per staged tile: two per lane
constexpr int kFusedThreads = 128;
constexpr float kLog2e = 1.4426950408889634f;
constexpr float kLn2 = 0.6931471805599453f;
constexpr float kMasked = -1.0e30f;  // score of a key beyond N: finite, so exp2f gives 0 and never NaN
}  // namespace psa

// psa_attention_fused<KD> (variant `fused`): the whole PSA forward in one launch for YOLO26's small maps,
// instead of pack -> FA2(V_lo) -> FA2(V_hi) -> merge -> extract-V. Both passes share the scores, so one
// online softmax over the keys accumulates the 2*KD value columns [V_lo | V_hi] together. Grid
// (ceil(N / 4), BH), block 128: a CTA owns 4 query rows of one head, a warp one of them (the per-row work is
// a serial walk over all keys, so many small CTAs finish sooner than few large ones). Per tile of 64 keys
// the CTA stages K (KD x 64) and V (2KD x 64) channel-major from qkv into padded shared tiles (coalesced
// over keys, conflict-free reads); lane j scores keys j and j + 32 of a row against the row's Q (read from
// shared memory as a broadcast), the row max and sum reduce over the warp, and each lane accumulates the
// 2KD/32 value columns lane + 32 d with the probabilities broadcast by shuffles. Outputs, all in one pass:
// merged and the two FA2 outputs o_lo / o_hi, L (natural-log logsumexp, as FA2 writes it), this CTA's rows of
// every section of `packed` and of v_out, so the attention maps (probs from packed Q, K and L) and the
// backward (FA2's, reading packed, o_lo, o_hi, L) work on a fused forward exactly as on the composed one.
// KD in {16, 32} (YOLO26 uses 32); other widths take the composed path.
template <int KD>
__global__ void __launch_bounds__(psa::kFusedThreads)
    psa_attention_fused(const float* __restrict__ qkv, float* __restrict__ merged, float* __restrict__ v_out,
                        float* __restrict__ packed, float* __restrict__ o_lo, float* __restrict__ o_hi,
                        float* __restrict__ lse, int batch_heads, int n, float scale) {
  constexpr int QB = psa::kFusedQueries, TK = psa::kFusedKeys, VD = 2 * KD;
  constexpr int kRowsPerWarp = QB / (psa::kFusedThreads / 32), kDimsPerLane = VD / 32;
  static_assert(KD == 16 || KD == 32, "the fused PSA forward is instantiated for KEY_DIM 16 and 32");
  __shared__ float q_s[QB][KD];
  __shared__ float k_s[KD][TK + 1];
  __shared__ float v_s[VD][TK + 1];
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

  const float c = scale * psa::kLog2e;
  float m[kRowsPerWarp], l[kRowsPerWarp], acc[kRowsPerWarp][kDimsPerLane];
#pragma unroll
  for (int i = 0; i < kRowsPerWarp; ++i) {
    m[i] = psa::kMasked;
    l[i] = 0.f;
#pragma unroll
    for (int d = 0; d < kDimsPerLane; ++d) acc[i][d] = 0.f;
  }
  for (int k0 = 0; k0 < n; k0 += TK) {
    __syncthreads();  // Q is staged; the previous tile is consumed
    for (int i = threadIdx.x; i < 3 * KD * TK; i += psa::kFusedThreads) {
      const int ch = i / TK, j = i % TK, key = k0 + j;
      const float v = key < n ? head[size_t(KD + ch) * n + key] : 0.f;
      if (ch < KD)
        k_s[ch][j] = v;
      else
        v_s[ch - KD][j] = v;
    }
    __syncthreads();
#pragma unroll
    for (int i = 0; i < kRowsPerWarp; ++i) {
      const int r = warp * kRowsPerWarp + i;
      float s0 = 0.f, s1 = 0.f;  // keys k0 + lane and k0 + lane + 32
#pragma unroll
      for (int cc = 0; cc < KD; ++cc) {
        const float q = q_s[r][cc];
        s0 += q * k_s[cc][lane];
        s1 += q * k_s[cc][lane + 32];
      }
      s0 = k0 + lane < n ? s0 * c : psa::kMasked;
      s1 = k0 + lane + 32 < n ? s1 * c : psa::kMasked;
      const float m_new = fmaxf(m[i], lab_warp_max(fmaxf(s0, s1)));
      const float p0 = exp2f(s0 - m_new), p1 = exp2f(s1 - m_new), alpha = exp2f(m[i] - m_new);
      l[i] = l[i] * alpha + lab_warp_sum(p0 + p1);
      m[i] = m_new;
#pragma unroll
      for (int d = 0; d < kDimsPerLane; ++d) acc[i][d] *= alpha;
      for (int j = 0; j < 32; ++j) {
        const float pj0 = __shfl_sync(LAB_FULL_MASK, p0, j), pj1 = __shfl_sync(LAB_FULL_MASK, p1, j);
#pragma unroll
        for (int d = 0; d < kDimsPerLane; ++d)
          acc[i][d] += pj0 * v_s[lane + 32 * d][j] + pj1 * v_s[lane + 32 * d][j + 32];
      }
    }
  }

#pragma unroll
  for (int i = 0; i < kRowsPerWarp; ++i) {
    const int row = n0 + warp * kRowsPerWarp + i;
    if (row >= n) continue;
    const float inv = 1.f / l[i];
#pragma unroll
    for (int d = 0; d < kDimsPerLane; ++d) {
      const int dim = lane + 32 * d, half = dim / KD, cc = dim % KD;
      const float value = acc[i][d] * inv;
      (half ? o_hi : o_lo)[(size_t(bh) * n + row) * KD + cc] = value;
      merged[(size_t(bh) * VD + dim) * n + row] = value;
    }
    if (lane == 0) lse[size_t(bh) * n + row] = m[i] * psa::kLn2 + logf(l[i]);
  }
}
