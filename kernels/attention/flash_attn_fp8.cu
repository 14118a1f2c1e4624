// The fp8 Hopper Flash Attention forward: e4m3 Q, K and V with per-tensor float scales, float accumulation,
// fp16 O and float L, on wgmma m64nNk32 e4m3 (common/lab_wgmma.cuh), HEAD_DIM 128.
//
// flash_attn_fp8_vt (the pre-pass): e4m3 products take both operands K-major, so P V needs V^T with the keys
// contiguous. It writes V^T [BH, 128, n_k_padded], the keys of each 16 in lab_e4m3_p_column order, so that P's
// A fragments can be made from S's accumulators in place (lab_wgmma_e4m3_a_from_accumulators). A thread moves
// a 16 x 16 byte block with 16-byte loads and stores, transposing it in registers (prmt).
//
// flash_attn_fp8_fwd: the CTA and schedule of flash_attn_wgmma_pipelined.cu: warpgroup 0 the TMA producer (Q
// once, then K_j and V^T_{j-1} tiles of BN keys into rings of STAGES stages, K and V^T released by their own
// "empty" barriers), warpgroups 1 and 2 consumers of 64 query rows each, running the softmax of key tile j
// while P V of tile j - 1 is on the tensor cores. Per key tile: S = Q K^T (4 k32 products, N BN, both K-major
// in the 128-byte swizzle: a row of 128 e4m3 is one swizzled row), the online softmax of
// flash_attn_wgmma_fwd_steps.cuh on S scaled by score_scale, P multiplied by 448 (its largest value, 1 at the
// row's maximum, maps to e4m3's largest) and rounded into A fragments, O += P V (BN / 32 RS products, N 128,
// V^T's tile K-major). The epilogue divides by 448 and the row sum (of the unrounded P) and multiplies by
// v_scale. Keys past n_k score kMasked (P = 0); TMA fills rows past the tensors with zeros.
// EXP2_FMA (a template argument, 0 to 8): that many of every 8 softmax exponentials run on the FMA pipe
// (attention/exp2_fma.cuh), the rest on ex2.approx.
#include "common/lab.cuh"
#include "common/lab_mma.cuh"
#include "common/lab_tensor_map.cuh"
#include "common/lab_mbarrier.cuh"
#include "common/lab_swizzle.cuh"
#include "common/lab_tma.cuh"
#include "common/lab_wgmma.cuh"
#include "attention/flash_attn_wgmma_params.cuh"
#include "attention/flash_attn_wgmma_tiles.cuh"
#include "attention/flash_attn_wgmma_fwd_steps.cuh"
#include "attention/flash_attn_fp8_params.cuh"

namespace fa_fp8 {

constexpr int kHeadDim = 128;
constexpr float kPScale = 448.f;  // P's 1 maps to e4m3's largest finite value

// Shared memory: Q (128 rows of 128 bytes), the K and V^T rings (BN x 128 bytes a stage each), then Q's full
// barrier and each stage's K full, V full, K empty and V empty barriers. Every region a multiple of 1024
// bytes.
template <int BN, int STAGES>
struct Shared {
  static constexpr unsigned tile_bytes = BN * kHeadDim;
  static constexpr unsigned k = fa_wgmma::kBlockM * kHeadDim;
  static constexpr unsigned vt = k + STAGES * tile_bytes;
  static constexpr unsigned barriers = vt + STAGES * tile_bytes;
  static constexpr unsigned bytes = barriers + (1 + 4 * STAGES) * 8;
  unsigned char *q, *k_ring, *vt_ring;
  uint64_t *q_full, *k_full, *v_full, *k_empty, *v_empty;
  __device__ explicit Shared(unsigned char* base)
      : q(base),
        k_ring(base + k),
        vt_ring(base + vt),
        q_full(reinterpret_cast<uint64_t*>(base + barriers)),
        k_full(q_full + 1),
        v_full(k_full + STAGES),
        k_empty(v_full + STAGES),
        v_empty(k_empty + STAGES) {}
  __device__ const unsigned char* k_stage(int s) const { return k_ring + s * tile_bytes; }
  __device__ const unsigned char* vt_stage(int s) const { return vt_ring + s * tile_bytes; }
};

// The K-major e4m3 operand of k32 step kk in a tile of 128-byte swizzled rows.
__device__ __forceinline__ unsigned long long k32_desc(const unsigned char* tile, int kk) {
  return lab_wgmma_desc(tile + 32 * kk, 16, fa_wgmma::kSwizzleAtom, LAB_SWIZZLE_128B);
}

// P (scaled by kPScale) as A fragments of the BN / 32 k32 chunks, chunk C onwards.
template <int C, int BN>
__device__ __forceinline__ void pack_p(const float (&sc)[BN / 2], uint32_t (&pa)[BN / 32][4]) {
  if constexpr (C < BN / 32) {
    lab_wgmma_e4m3_a_from_accumulators<C>(pa[C], sc, kPScale);
    pack_p<C + 1, BN>(sc, pa);
  }
}

// Tile j of K (`is_k`) or V^T into its ring stage, once the stage's previous tile is released.
template <int BN, int STAGES>
__device__ __forceinline__ void load_tile(const lab::FlashAttnFp8FwdParams& p, const Shared<BN, STAGES>& sh,
                                          bool is_k, int j, int bh) {
  const int s = j % STAGES;
  uint64_t* full = is_k ? &sh.k_full[s] : &sh.v_full[s];
  if (j >= STAGES) lab_mbarrier_wait_parity(is_k ? &sh.k_empty[s] : &sh.v_empty[s], (j / STAGES - 1) & 1);
  lab_mbarrier_arrive_expect_tx(full, Shared<BN, STAGES>::tile_bytes);
  if (is_k)
    lab_tma_load_3d(sh.k_ring + s * Shared<BN, STAGES>::tile_bytes, &p.k_map, full, 0, j * BN, bh);
  else
    lab_tma_load_3d(sh.vt_ring + s * Shared<BN, STAGES>::tile_bytes, &p.vt_map, full, j * BN, 0, bh);
}

// The producer's one thread: Q once, then K_j and V^T_{j-1} in the order the consumers use them.
template <int BN, int STAGES>
__device__ __forceinline__ void produce(const lab::FlashAttnFp8FwdParams& p, const Shared<BN, STAGES>& sh, int m0,
                                        int bh, int tiles) {
  lab_mbarrier_arrive_expect_tx(sh.q_full, fa_wgmma::kBlockM * kHeadDim);
  lab_tma_load_3d(sh.q, &p.q_map, sh.q_full, 0, m0, bh);
  for (int j = 0; j < tiles; ++j) {
    load_tile(p, sh, true, j, bh);
    if (j > 0) load_tile(p, sh, false, j - 1, bh);
  }
  load_tile(p, sh, false, tiles - 1, bh);
}

// Issues S = Q K^T of one key tile (no fence, no commit).
template <int BN>
__device__ __forceinline__ void issue_scores(float (&sc)[BN / 2], const unsigned char* sq, const unsigned char* kt) {
#pragma unroll
  for (int kk = 0; kk < kHeadDim / 32; ++kk)
    lab_wgmma_ss<LAB_E4M3, BN, 0, 0>(sc, k32_desc(sq, kk), k32_desc(kt, kk), kk > 0);
}

// Issues O += P V of one key tile (no fence, no commit).
template <int BN>
__device__ __forceinline__ void issue_pv(float (&o)[kHeadDim / 2], const uint32_t (&pa)[BN / 32][4],
                                         const unsigned char* vt) {
#pragma unroll
  for (int kk = 0; kk < BN / 32; ++kk) lab_wgmma_rs<LAB_E4M3, kHeadDim, 0>(o, pa[kk], k32_desc(vt, kk), 1);
}

// O / (kPScale * row sum) * v_scale in fp16, two columns per 4-byte store; L by one thread per row.
__device__ __forceinline__ void store(const lab::FlashAttnFp8FwdParams& p, const float (&o)[kHeadDim / 2],
                                      const float (&row_max)[2], const float (&row_sum)[2], int bh, int row0,
                                      int q) {
  float f[2];
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    const float sum = lab_group4_sum(row_sum[r]);
    f[r] = p.v_scale / (kPScale * sum);
    const int row = row0 + 8 * r;
    if (q == 0 && row < p.n_q) p.lse[size_t(bh) * p.n_q + row] = (row_max[r] + log2f(sum)) * fa_wgmma::kLn2;
  }
#pragma unroll
  for (int i = 0; i < kHeadDim / 2; i += 2) {
    const int row = row0 + 8 * ((i / 2) % 2);
    if (row >= p.n_q) continue;
    const int col = 8 * (i / 4) + 2 * q;
    *reinterpret_cast<uint32_t*>(p.o + (size_t(bh) * p.n_q + row) * kHeadDim + col) =
        lab_pack2<LAB_F16>(o[i] * f[(i / 2) % 2], o[i + 1] * f[(i / 2) % 2]);
  }
}

}  // namespace fa_fp8

namespace fa_fp8 {

// A 4 x 4 byte transpose: afterwards w[b] holds byte b of the old w[0], w[1], w[2], w[3], in that order from
// its low byte (two rounds of prmt: pairs of bytes, then pairs of pairs).
__device__ __forceinline__ void transpose_bytes_4x4(uint32_t (&w)[4]) {
  const uint32_t lo01 = __byte_perm(w[0], w[1], 0x5140), hi01 = __byte_perm(w[0], w[1], 0x7362);
  const uint32_t lo23 = __byte_perm(w[2], w[3], 0x5140), hi23 = __byte_perm(w[2], w[3], 0x7362);
  w[0] = __byte_perm(lo01, lo23, 0x5410);
  w[1] = __byte_perm(lo01, lo23, 0x7632);
  w[2] = __byte_perm(hi01, hi23, 0x5410);
  w[3] = __byte_perm(hi01, hi23, 0x7632);
}

}  // namespace fa_fp8

// Grid (ceil(n_k_padded / 16 * 8 / 256), BH), block 256: thread i of head blockIdx.y moves 16 keys (block
// i / 8) x 16 dimensions (group i % 8), in registers: 16 loads of 16 bytes (a key's 16 dimensions; rows past
// n_k are zero), 16 byte transposes of 4 x 4 (the four keys an output word holds, in lab_e4m3_p_column
// order), 16 stores of 16 bytes (a dimension's 16 keys). A warp's loads read 4 whole 128-byte rows of V, its
// stores fill 64-byte runs of 8 V^T rows.
extern "C" __global__ void flash_attn_fp8_vt(const lab::FlashAttnFp8VtParams p) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x, bh = blockIdx.y;
  const int group = i % 8, key0 = i / 8 * 16;
  if (key0 >= p.n_k_padded) return;
  uint32_t keys[16][4];  // keys[r]: dimensions 16 group .. + 15 of key key0 + r, four to a word
#pragma unroll
  for (int r = 0; r < 16; ++r) {
    const uint4 row = key0 + r < p.n_k ? *reinterpret_cast<const uint4*>(
                                             p.v + (size_t(bh) * p.n_k + key0 + r) * 128 + 16 * group)
                                       : uint4{0, 0, 0, 0};
    keys[r][0] = row.x, keys[r][1] = row.y, keys[r][2] = row.z, keys[r][3] = row.w;
  }
  uint32_t dims[16][4];  // dims[c]: positions 0 .. 15 of dimension 16 group + c, four to a word
#pragma unroll
  for (int w = 0; w < 4; ++w)
#pragma unroll
    for (int word = 0; word < 4; ++word) {
      uint32_t x[4];
#pragma unroll
      for (int r = 0; r < 4; ++r) x[r] = keys[lab_e4m3_p_column(4 * word + r)][w];
      fa_fp8::transpose_bytes_4x4(x);
#pragma unroll
      for (int b = 0; b < 4; ++b) dims[4 * w + b][word] = x[b];
    }
#pragma unroll
  for (int c = 0; c < 16; ++c)
    *reinterpret_cast<uint4*>(p.vt + (size_t(bh) * 128 + 16 * group + c) * p.n_k_padded + key0) =
        uint4{dims[c][0], dims[c][1], dims[c][2], dims[c][3]};
}

// Grid (ceil(N_CTX_Q / 128), BH), block 384, dynamic shared memory Shared<BN, STAGES>::bytes + 1024.
// EXP2_FMA of every 8 softmax exponentials run on the FMA pipe (exp2_fma.cuh), the rest on the MUFU unit.
template <int BN, int STAGES, int EXP2_FMA>
__global__ void __launch_bounds__(384, 1) flash_attn_fp8_fwd(const __grid_constant__ lab::FlashAttnFp8FwdParams p) {
  using namespace fa_wgmma;
  using fa_fp8::kHeadDim;
  LAB_DYNAMIC_SHARED(unsigned char, raw);
  const fa_fp8::Shared<BN, STAGES> sh(lab_smem_align_1024(raw));
  const int tid = threadIdx.x, tiles = (p.n_k + BN - 1) / BN;
  if (tid == 0) {
    lab_mbarrier_init(sh.q_full, 1);
    for (int s = 0; s < STAGES; ++s) {
      lab_mbarrier_init(&sh.k_full[s], 1);
      lab_mbarrier_init(&sh.v_full[s], 1);
      lab_mbarrier_init(&sh.k_empty[s], 256);  // every consumer thread
      lab_mbarrier_init(&sh.v_empty[s], 256);
    }
    lab_fence_mbarrier_init();
  }
  __syncthreads();
  if (tid < 128) {
    lab_setmaxnreg_dec<24>();
    if (tid == 0) fa_fp8::produce<BN, STAGES>(p, sh, blockIdx.x * kBlockM, blockIdx.y, tiles);
    return;
  }
  lab_setmaxnreg_inc<240>();
  const int c = tid / 128 - 1, t = tid % 128, q = t % 4;
  const int row0 = blockIdx.x * kBlockM + 64 * c + 16 * (t / 32) + t % 32 / 4;
  const unsigned char* sq = sh.q + c * 64 * kHeadDim;
  const float scale_log2 = p.score_scale * kLog2e;
  float o[kHeadDim / 2], sc[BN / 2];
  zero_output<kHeadDim>(o);
  float row_max[2] = {kMasked, kMasked}, row_sum[2] = {0.f, 0.f}, alpha[2];
  uint32_t pa[BN / 32][4];

  // Tile 0: its scores and softmax; O is still zero, so neither a rescale nor a product yet.
  lab_mbarrier_wait_parity(sh.q_full, 0);
  lab_mbarrier_wait_parity(&sh.k_full[0], 0);
  lab_wgmma_fence();
  fa_fp8::issue_scores<BN>(sc, sq, sh.k_stage(0));
  lab_wgmma_commit_group();
  lab_wgmma_wait_group<0>();
  lab_wgmma_hold(sc);
  lab_mbarrier_arrive(&sh.k_empty[0]);
  online_softmax<BN, EXP2_FMA>(sc, 0, p.n_k, q, scale_log2, row_max, row_sum, alpha);
  fa_fp8::pack_p<0, BN>(sc, pa);

  for (int j = 1; j < tiles; ++j) {
    const int s = j % STAGES, prev = (j - 1) % STAGES;
    const unsigned prev_parity = ((j - 1) / STAGES) & 1;
    lab_mbarrier_wait_parity(&sh.k_full[s], (j / STAGES) & 1);
    lab_wgmma_fence();
    fa_fp8::issue_scores<BN>(sc, sq, sh.k_stage(s));
    lab_wgmma_commit_group();
    lab_mbarrier_wait_parity(&sh.v_full[prev], prev_parity);
    fa_fp8::issue_pv<BN>(o, pa, sh.vt_stage(prev));
    lab_wgmma_commit_group();
    lab_wgmma_wait_group<1>();  // S_j; P_{j-1} V_{j-1} may still run
    lab_wgmma_hold(sc);
    lab_mbarrier_arrive(&sh.k_empty[s]);
    online_softmax<BN, EXP2_FMA>(sc, j, p.n_k, q, scale_log2, row_max, row_sum, alpha);
    // As in flash_attn_wgmma_pipelined.cu: the holds and the block boundary keep the softmax before the wait.
    lab_wgmma_hold(sc);
    lab_wgmma_hold(row_sum);
    block_boundary(&sh.v_full[prev], prev_parity);
    lab_wgmma_wait_group<0>();
    lab_wgmma_hold(o);
    lab_mbarrier_arrive(&sh.v_empty[prev]);
    rescale_output<kHeadDim>(o, alpha);
    fa_fp8::pack_p<0, BN>(sc, pa);
  }

  const int last = (tiles - 1) % STAGES;
  lab_mbarrier_wait_parity(&sh.v_full[last], ((tiles - 1) / STAGES) & 1);
  lab_wgmma_fence();
  fa_fp8::issue_pv<BN>(o, pa, sh.vt_stage(last));
  lab_wgmma_commit_group();
  lab_wgmma_wait_group<0>();
  lab_wgmma_hold(o);
  fa_fp8::store(p, o, row_max, row_sum, blockIdx.y, row0, q);
}
