// flash_attn_wgmma: Flash Attention forward in fp16 / bf16 for Hopper (sm_90a) — TMA copies on an mbarrier
// pipeline, wgmma products and warp specialisation. Non-causal. Same layouts, scale and L (natural-log
// logsumexp of the scaled scores) as flash_attn2_mma.cu, whose mma.sync kernel stays the portable variant.
//
// A CTA is three warpgroups (384 threads) and owns 128 query rows of one batch * head; grid
// (ceil(N_CTX_Q / 128), BH).
//   Warpgroup 0, the producer, gives registers back (setmaxnreg.dec) and one of its threads issues every copy:
//     the Q block once, then the K and V tiles of BN keys into a ring of STAGES buffers. K and V of a stage
//     complete on their own "full" mbarriers, so the scores start while V is still landing; before reusing a
//     stage it waits for that stage's "empty" mbarrier.
//   Warpgroups 1 and 2, the consumers (setmaxnreg.inc), own 64 query rows each. Per tile: S = Q K^T as
//     HEAD_DIM / 16 wgmma m64nBNk16 with Q and K in shared memory; the online softmax on the accumulator
//     registers, in the log2 domain with ex2.approx.ftz as flash_attn2_mma.cu; P, rounded to the element
//     type, is register for register the A operand of O += P V: BN / 16 wgmma m64nHEAD_DIMk16 with V in
//     shared memory read MN-major (V's rows are keys, the product's K dimension). Then every consumer thread
//     arrives on the stage's empty mbarrier. The two consumers share the tensor cores: while one runs its
//     softmax, the other's products run.
// Shared memory, in 1024-byte aligned regions: Q as [HEAD_DIM / 64][128 rows][64], then K and V each as
//   [STAGES][HEAD_DIM / 64][BN rows][64] — column blocks of 64 elements, 128-byte rows in the 128-byte swizzle
//   the copies write (common/lab_swizzle.cuh) — then the mbarriers. Rows past N_CTX_Q / N_CTX_K load as zeros
//   (the maps' bounds); their scores are masked and their outputs not stored.
// Precision: products of 16-bit values summed in float; P rounded to the element type before P V, O once at
//   the end; softmax statistics and L in float32.
#include "common/lab.cuh"
#include "common/lab_mma.cuh"
#include "common/lab_tensor_map.cuh"
#include "common/lab_mbarrier.cuh"
#include "common/lab_swizzle.cuh"
#include "common/lab_tma.cuh"
#include "common/lab_wgmma.cuh"
#include "attention/flash_attn_wgmma_params.cuh"
#include "attention/flash_attn_wgmma_tiles.cuh"

namespace fa_wgmma {

constexpr int kBlockM = 128;  // query rows per CTA: 64 per consumer warpgroup
constexpr int kThreads = 384;

// Byte offsets of the shared-memory regions of one configuration.
template <int HEAD_DIM, int BN, int STAGES>
struct Smem {
  static constexpr unsigned q_elems = kBlockM * HEAD_DIM;
  static constexpr unsigned tile_elems = BN * HEAD_DIM;  // one K or V stage
  static constexpr unsigned k = q_elems * 2;
  static constexpr unsigned v = k + STAGES * tile_elems * 2;
  static constexpr unsigned barriers = v + STAGES * tile_elems * 2;
  static constexpr unsigned bytes = barriers + (1 + 3 * STAGES) * 8;
};

}  // namespace fa_wgmma

// Forward: grid (ceil(N_CTX_Q / 128), BH), block 384, dynamic shared memory Smem<...>::bytes + 1024 (the
// regions are aligned up to 1024 bytes inside it).
template <int DT, int HEAD_DIM, int BN, int STAGES>
__global__ void __launch_bounds__(384, 1)
    flash_attn_wgmma_fwd(const __grid_constant__ lab::FlashAttnWgmmaFwdParams p) {
  using namespace fa_wgmma;
  using S = Smem<HEAD_DIM, BN, STAGES>;
  static_assert(HEAD_DIM % kColumns == 0 && BN % 16 == 0, "HEAD_DIM is a multiple of 64, BN of 16");
  constexpr int kBlocks = HEAD_DIM / kColumns;
  LAB_DYNAMIC_SHARED(unsigned char, raw);
  unsigned char* base = lab_smem_align_1024(raw);
  uint16_t* sq = reinterpret_cast<uint16_t*>(base);
  uint16_t* sk = reinterpret_cast<uint16_t*>(base + S::k);
  uint16_t* sv = reinterpret_cast<uint16_t*>(base + S::v);
  uint64_t* q_full = reinterpret_cast<uint64_t*>(base + S::barriers);
  uint64_t* k_full = q_full + 1;
  uint64_t* v_full = k_full + STAGES;
  uint64_t* empty = v_full + STAGES;

  const int tid = threadIdx.x, warpgroup = tid / 128;
  const int bh = blockIdx.y, m0 = blockIdx.x * kBlockM;
  const int tiles = (p.n_k + BN - 1) / BN;
  if (tid == 0) {
    lab_mbarrier_init(q_full, 1);
    for (int s = 0; s < STAGES; ++s) {
      lab_mbarrier_init(&k_full[s], 1);
      lab_mbarrier_init(&v_full[s], 1);
      lab_mbarrier_init(&empty[s], 256);  // every consumer thread
    }
    lab_fence_mbarrier_init();
  }
  __syncthreads();

  if (warpgroup == 0) {  // the producer
    lab_setmaxnreg_dec<24>();
    if (tid != 0) return;
    lab_mbarrier_arrive_expect_tx(q_full, S::q_elems * 2);
    for (int b = 0; b < kBlocks; ++b)
      lab_tma_load_3d(sq + b * kBlockM * kColumns, &p.q_map, q_full, b * kColumns, m0, bh);
    for (int j = 0; j < tiles; ++j) {
      const int s = j % STAGES;
      if (j >= STAGES) lab_mbarrier_wait_parity(&empty[s], (j / STAGES - 1) & 1);
      lab_mbarrier_arrive_expect_tx(&k_full[s], S::tile_elems * 2);
      for (int b = 0; b < kBlocks; ++b)
        lab_tma_load_3d(sk + s * S::tile_elems + b * BN * kColumns, &p.k_map, &k_full[s], b * kColumns, j * BN, bh);
      lab_mbarrier_arrive_expect_tx(&v_full[s], S::tile_elems * 2);
      for (int b = 0; b < kBlocks; ++b)
        lab_tma_load_3d(sv + s * S::tile_elems + b * BN * kColumns, &p.v_map, &v_full[s], b * kColumns, j * BN, bh);
    }
    return;
  }

  // A consumer: rows 64 c .. 64 c + 63 of the block. Accumulator element i of this thread is row
  // 16 w + g + 8 ((i / 2) % 2), column 8 (i / 4) + 2 q + i % 2 (common/lab_wgmma.cuh).
  lab_setmaxnreg_inc<240>();
  const int c = warpgroup - 1, t = tid % 128, w = t / 32, g = t % 32 / 4, q = t % 4;
  const uint16_t* sq_rows = sq + c * 64 * kColumns;
  const float scale_log2 = p.scale * kLog2e;
  float o[HEAD_DIM / 2];
#pragma unroll
  for (int i = 0; i < HEAD_DIM / 2; ++i) o[i] = 0.f;
  float row_max[2] = {kMasked, kMasked}, row_sum[2] = {0.f, 0.f};

  lab_mbarrier_wait_parity(q_full, 0);
  for (int j = 0; j < tiles; ++j) {
    const int s = j % STAGES;
    const unsigned parity = (j / STAGES) & 1;
    const uint16_t* kt = sk + s * S::tile_elems;
    const uint16_t* vt = sv + s * S::tile_elems;

    float sc[BN / 2];
    lab_mbarrier_wait_parity(&k_full[s], parity);
    lab_wgmma_fence();
#pragma unroll
    for (int kk = 0; kk < HEAD_DIM / 16; ++kk)
      lab_wgmma_ss<DT, BN, 0, 0>(sc, k_major_desc(sq_rows, kBlockM, kk), k_major_desc(kt, BN, kk), kk > 0);
    lab_wgmma_commit_group();
    lab_wgmma_wait_group<0>();
    lab_wgmma_hold(sc);

    // Online softmax over this tile; keys past n_k (only in the last tile; every row keeps one key there)
    // score kMasked, whose exponent is 0. Scores stay unscaled until the exponent (scale > 0).
    if ((j + 1) * BN > p.n_k) {
#pragma unroll
      for (int i = 0; i < BN / 2; ++i)
        if (j * BN + 8 * (i / 4) + 2 * q + i % 2 >= p.n_k) sc[i] = kMasked;
    }
    float tile_max[2] = {kMasked, kMasked};
#pragma unroll
    for (int i = 0; i < BN / 2; ++i) tile_max[(i / 2) % 2] = fmaxf(tile_max[(i / 2) % 2], sc[i]);
    float alpha[2];
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      const float m_new = fmaxf(row_max[r], lab_group4_max(tile_max[r]) * scale_log2);
      alpha[r] = lab_exp2_ftz(row_max[r] - m_new);
      row_max[r] = m_new;
      row_sum[r] *= alpha[r];
    }
#pragma unroll
    for (int i = 0; i < BN / 2; ++i) {
      sc[i] = lab_exp2_ftz(fmaf(sc[i], scale_log2, -row_max[(i / 2) % 2]));
      row_sum[(i / 2) % 2] += sc[i];
    }
#pragma unroll
    for (int i = 0; i < HEAD_DIM / 2; ++i) o[i] *= alpha[(i / 2) % 2];
    // P's k16 chunk kk as wgmma's A fragment: accumulator elements 8 kk .. 8 kk + 7 are exactly its
    // (row g, columns 2q..), (row g + 8, 2q..), (row g, 2q + 8..), (row g + 8, 2q + 8..) pairs.
    uint32_t pa[BN / 16][4];
#pragma unroll
    for (int kk = 0; kk < BN / 16; ++kk)
#pragma unroll
      for (int r = 0; r < 4; ++r) pa[kk][r] = lab_pack2<DT>(sc[8 * kk + 2 * r], sc[8 * kk + 2 * r + 1]);

    lab_mbarrier_wait_parity(&v_full[s], parity);
    lab_wgmma_fence();
#pragma unroll
    for (int kk = 0; kk < BN / 16; ++kk)  // V MN-major: 64-column blocks BN * 128 bytes apart
      lab_wgmma_rs<DT, HEAD_DIM, 1>(o, pa[kk], mn_major_desc(vt, BN, kk), 1);
    lab_wgmma_commit_group();
    lab_wgmma_wait_group<0>();
    lab_wgmma_hold(o);
    lab_mbarrier_arrive(&empty[s]);
  }

  // O = acc / rowsum rounded to the element type, two columns per 4-byte store; L by one thread per row.
  float inv[2];
  const int row0 = m0 + 64 * c + 16 * w + g;
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    const float sum = lab_group4_sum(row_sum[r]);
    inv[r] = 1.f / sum;
    const int row = row0 + 8 * r;
    if (q == 0 && row < p.n_q) p.lse[size_t(bh) * p.n_q + row] = (row_max[r] + log2f(sum)) * kLn2;
  }
#pragma unroll
  for (int i = 0; i < HEAD_DIM / 2; i += 2) {
    const int row = row0 + 8 * ((i / 2) % 2);
    if (row >= p.n_q) continue;
    const int col = 8 * (i / 4) + 2 * q;
    const float f = inv[(i / 2) % 2];
    *reinterpret_cast<uint32_t*>(p.o + (size_t(bh) * p.n_q + row) * HEAD_DIM + col) =
        lab_pack2<DT>(o[i] * f, o[i + 1] * f);
  }
}
