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
