// The steps the two schedules of the Hopper Flash Attention forward share (flash_attn_wgmma.cu: one tile at a
// time; flash_attn_wgmma_pipelined.cu: the scores of tile j beside P V of tile j - 1): the CTA's
// shared-memory regions and mbarriers, the producer warpgroup, the consumer's products, online softmax, P as
// wgmma A fragments, and the epilogue. Layouts, precision and the CTA shape are described in
// flash_attn_wgmma.cu.
#pragma once

#include "attention/exp2_fma.cuh"

namespace fa_wgmma {

constexpr int kBlockM = 128;  // query rows per CTA: 64 per consumer warpgroup
constexpr int kThreads = 384;

// Byte offsets of the shared-memory regions of one configuration; SPLIT_EMPTY: K and V of a stage are
// released on their own "empty" barriers (one more barrier per stage).
template <int HEAD_DIM, int BN, int STAGES, bool SPLIT_EMPTY = false>
struct Smem {
  static constexpr unsigned q_elems = kBlockM * HEAD_DIM;
  static constexpr unsigned tile_elems = BN * HEAD_DIM;  // one K or V stage
  static constexpr unsigned k = q_elems * 2;
  static constexpr unsigned v = k + STAGES * tile_elems * 2;
  static constexpr unsigned barriers = v + STAGES * tile_elems * 2;
  static constexpr unsigned bytes = barriers + (2 + (SPLIT_EMPTY ? 4 : 3) * STAGES) * 8;
};

// The CTA's tiles and mbarriers in its dynamic shared memory (aligned up to 1024 bytes): Q, the K and V
// rings, then Q's "full" and "empty" barriers (the empty one: a persistent CTA's next query block), K's and
// V's "full" barriers and the "empty" barriers, one per stage (K's then V's with SPLIT_EMPTY; else k_empty and
// v_empty are the same barriers, released by both).
template <int HEAD_DIM, int BN, int STAGES, bool SPLIT_EMPTY = false>
struct FwdShared {
  static_assert(HEAD_DIM % kColumns == 0 && BN % 16 == 0, "HEAD_DIM is a multiple of 64, BN of 16");
  using S = Smem<HEAD_DIM, BN, STAGES, SPLIT_EMPTY>;
  uint16_t *q, *k, *v;
  uint64_t *q_full, *q_empty, *k_full, *v_full, *k_empty, *v_empty;

  __device__ explicit FwdShared(unsigned char* base)
      : q(reinterpret_cast<uint16_t*>(base)),
        k(reinterpret_cast<uint16_t*>(base + S::k)),
        v(reinterpret_cast<uint16_t*>(base + S::v)),
        q_full(reinterpret_cast<uint64_t*>(base + S::barriers)),
        q_empty(q_full + 1),
        k_full(q_full + 2),
        v_full(k_full + STAGES),
        k_empty(v_full + STAGES),
        v_empty(SPLIT_EMPTY ? k_empty + STAGES : k_empty) {}
  __device__ const uint16_t* k_stage(int s) const { return k + s * S::tile_elems; }
  __device__ const uint16_t* v_stage(int s) const { return v + s * S::tile_elems; }

  // Thread 0 initialises the barriers; every thread of the CTA then passes the block barrier.
  __device__ void init_barriers(int tid) const {
    if (tid == 0) {
      lab_mbarrier_init(q_full, 1);
      lab_mbarrier_init(q_empty, 256);  // every consumer thread
      for (int s = 0; s < STAGES; ++s) {
        lab_mbarrier_init(&k_full[s], 1);
        lab_mbarrier_init(&v_full[s], 1);
        lab_mbarrier_init(&k_empty[s], 256);  // every consumer thread
        if (SPLIT_EMPTY) lab_mbarrier_init(&v_empty[s], 256);
      }
      lab_fence_mbarrier_init();
    }
    __syncthreads();
  }
};

// Key tile j of K or V (`map`) of head bh into ring slot `slot` (stage slot % STAGES: a persistent CTA's
// slots run on across its query blocks), completing on full[stage]; with `wait`, first waits until
// empty[stage] has released the stage's previous tile.
template <int HEAD_DIM, int BN, int STAGES>
__device__ __forceinline__ void load_key_tile(const lab::TensorMap* map, uint16_t* ring, uint64_t* full,
                                              uint64_t* empty, bool wait, int slot, int j, int bh) {
  constexpr unsigned kTileElems = BN * HEAD_DIM;
  const int s = slot % STAGES;
  if (wait && slot >= STAGES) lab_mbarrier_wait_parity(&empty[s], (slot / STAGES - 1) & 1);
  lab_mbarrier_arrive_expect_tx(&full[s], kTileElems * 2);
  for (int b = 0; b < HEAD_DIM / kColumns; ++b)
    lab_tma_load_3d(ring + s * kTileElems + b * BN * kColumns, map, &full[s], b * kColumns, j * BN, bh);
}

// The query blocks a CTA owns: blocks first, first + stride, ... below total (ceil(N_CTX_Q / 128) per head,
// head-major). The one-block-a-CTA grid (ceil(N_CTX_Q / 128), BH) gives each CTA its own block; a persistent
// grid (G, 1) walks them with stride G.
struct QueryBlocks {
  int first, stride, total, per_head;
  __device__ explicit QueryBlocks(const lab::FlashAttnWgmmaFwdParams& p)
      : first(blockIdx.y * gridDim.x + blockIdx.x),
        stride(gridDim.x * gridDim.y),
        total(0),
        per_head((p.n_q + kBlockM - 1) / kBlockM) {
    total = per_head * p.batch_heads;
  }
};

// The producer's one thread, for each of the CTA's query blocks (the n-th from ring slot n * tiles on): the
// block's Q once (after the consumers have released the previous block's: q_empty), then the K and V tiles
// of every key tile into the rings, each stage refilled once its empty barrier has completed. With
// SPLIT_EMPTY (the pipelined schedule) V lags K by a tile, K_j then V_{j-1}, the order the consumers use them
// in: K_{j+1} is not held up behind V_j, whose stage is released a softmax later.
template <int HEAD_DIM, int BN, int STAGES, bool SPLIT_EMPTY>
__device__ __forceinline__ void produce_tiles(const lab::FlashAttnWgmmaFwdParams& p,
                                              const FwdShared<HEAD_DIM, BN, STAGES, SPLIT_EMPTY>& sh,
                                              int tiles) {
  using S = Smem<HEAD_DIM, BN, STAGES, SPLIT_EMPTY>;
  const QueryBlocks blocks(p);
  int slot0 = 0;
  for (int n = 0, block = blocks.first; block < blocks.total; ++n, block += blocks.stride, slot0 += tiles) {
    const int m0 = block % blocks.per_head * kBlockM, bh = block / blocks.per_head;
    if (n > 0) lab_mbarrier_wait_parity(sh.q_empty, (n - 1) & 1);
    lab_mbarrier_arrive_expect_tx(sh.q_full, S::q_elems * 2);
    for (int b = 0; b < HEAD_DIM / kColumns; ++b)
      lab_tma_load_3d(sh.q + b * kBlockM * kColumns, &p.q_map, sh.q_full, b * kColumns, m0, bh);
    for (int j = 0; j < tiles; ++j) {
      load_key_tile<HEAD_DIM, BN, STAGES>(&p.k_map, sh.k, sh.k_full, sh.k_empty, true, slot0 + j, j, bh);
      if (!SPLIT_EMPTY)
        load_key_tile<HEAD_DIM, BN, STAGES>(&p.v_map, sh.v, sh.v_full, sh.v_empty, false, slot0 + j, j, bh);
      else if (j > 0)
        load_key_tile<HEAD_DIM, BN, STAGES>(&p.v_map, sh.v, sh.v_full, sh.v_empty, true, slot0 + j - 1, j - 1,
                                            bh);
    }
    if (SPLIT_EMPTY)
      load_key_tile<HEAD_DIM, BN, STAGES>(&p.v_map, sh.v, sh.v_full, sh.v_empty, true, slot0 + tiles - 1,
                                          tiles - 1, bh);
  }
}

// The CTA's start, every thread: thread 0 initialises the barriers; warpgroup 0 becomes the producer (gives
// registers back, its thread 0 issues every copy) and returns false; the consumers take registers and return
// true.
template <int HEAD_DIM, int BN, int STAGES, bool SPLIT_EMPTY>
__device__ __forceinline__ bool start_consumer(const lab::FlashAttnWgmmaFwdParams& p,
                                               const FwdShared<HEAD_DIM, BN, STAGES, SPLIT_EMPTY>& sh,
                                               int tiles) {
  const int tid = threadIdx.x;
  sh.init_barriers(tid);
  if (tid / 128 == 0) {
    lab_setmaxnreg_dec<24>();
    if (tid == 0) produce_tiles(p, sh, tiles);
    return false;
  }
  lab_setmaxnreg_inc<240>();
  return true;
}

// A consumer thread of query block `block` (QueryBlocks' numbering): warpgroup c + 1 owns rows
// 64 c .. 64 c + 63 of the block. Accumulator element i of this thread is row 16 w + g + 8 ((i / 2) % 2),
// column 8 (i / 4) + 2 q + i % 2 (common/lab_wgmma.cuh); row0 is its first output row in head bh, sq_rows
// the consumer's 64 rows of Q; scale_log2 the scores' factor in the log2 domain.
struct ConsumerThread {
  int bh, q, row0;
  const uint16_t* sq_rows;
  float scale_log2;
  __device__ ConsumerThread(const uint16_t* sq, float scale, int block, int blocks_per_head) {
    const int tid = threadIdx.x, c = tid / 128 - 1, t = tid % 128, w = t / 32, g = t % 32 / 4;
    bh = block / blocks_per_head;
    q = t % 4;
    row0 = block % blocks_per_head * kBlockM + 64 * c + 16 * w + g;
    sq_rows = sq + c * 64 * kColumns;
    scale_log2 = scale * kLog2e;
  }
};

// A block boundary for ptxas, which schedules within blocks: without one it hoists a wgmma wait_group above
// independent arithmetic before it (the softmax that should overlap the product). `completed` is an mbarrier
// phase this thread has already waited for and that cannot move on yet, so the wait (a loop) returns at once.
__device__ __forceinline__ void block_boundary(uint64_t* completed, unsigned parity) {
  lab_mbarrier_wait_parity(completed, parity);
}

// The same, with the row sums joined to the wait's parity through a test that never holds (sums of
// exponentials are not negative; NaN compares false): ptxas cannot see through it, so it finishes the
// softmax's sums, and the exponentials they add, above the wait. Without it, once the skipped rescale left
// little work after the wait for P V, ptxas sank the sums (and the whole softmax at HEAD_DIM 256) below it.
__device__ __forceinline__ void block_boundary(uint64_t* completed, unsigned parity, const float (&row_sum)[2]) {
  const unsigned never = (row_sum[0] < 0.f) | (row_sum[1] < 0.f);
  lab_mbarrier_wait_parity(completed, parity ^ never);
}

// Issues S = Q K^T of one key tile (HEAD_DIM / 16 products, no fence, no commit): Q's 64 rows of this
// consumer and the K stage `kt`, both K-major in shared memory.
template <int DT, int HEAD_DIM, int BN>
__device__ __forceinline__ void issue_scores(float (&sc)[BN / 2], const uint16_t* sq_rows,
                                             const uint16_t* kt) {
#pragma unroll
  for (int kk = 0; kk < HEAD_DIM / 16; ++kk)
    lab_wgmma_ss<DT, BN, 0, 0>(sc, k_major_desc(sq_rows, kBlockM, kk), k_major_desc(kt, BN, kk), kk > 0);
}

// Issues O += P V of one key tile (BN / 16 products, no fence, no commit): P from registers, the V stage
// `vt` MN-major (64-column blocks BN * 128 bytes apart).
template <int DT, int HEAD_DIM, int BN>
__device__ __forceinline__ void issue_pv(float (&o)[HEAD_DIM / 2], const uint32_t (&pa)[BN / 16][4],
                                         const uint16_t* vt) {
#pragma unroll
  for (int kk = 0; kk < BN / 16; ++kk) lab_wgmma_rs<DT, HEAD_DIM, 1>(o, pa[kk], mn_major_desc(vt, BN, kk), 1);
}

// Partial results v[0..N) combined pairwise ((v0 op v1) op (v2 op v3) for N 4; v0 for N 1).
template <int N, typename Op>
__device__ __forceinline__ float combine(const float (&v)[N], Op op) {
  static_assert(N == 1 || N == 4, "one or four partials");
  if constexpr (N == 1) return v[0];
  else return op(op(v[0], v[1]), op(v[2], v[3]));
}

// The online softmax of key tile j on this thread's scores (accumulator element i: row 16 w + g +
// 8 ((i / 2) % 2), key j BN + 8 (i / 4) + 2 q + i % 2): sc becomes P (unrounded), row_max / row_sum move to
// this tile, alpha is the factor O is rescaled by. Keys past n_k (only in the last tile; every row keeps one
// key there) score kMasked, whose exponent is 0. Scores stay unscaled until the exponent (scale > 0).
// EXP2_FMA of every 8 exponentials (the first of each 8 accumulator elements) run on exp2_fma, the rest on
// ex2.approx. STALE_LOG2 > 0 (the pipelined 16-bit forward: kStaleLog2) moves a row's maximum lazily: only
// when the tile's exceeds it by more than STALE_LOG2, else alpha is exactly 1 (exp2 of 0), so
// rescale_output<.., true> can skip O. P is then at most 2^STALE_LOG2, far inside fp16's and bf16's range; the
// row sums are float and L uses the same maximum. 0: the eager maximum (the serial forward, and fp8, which
// scales P's 1 to e4m3's largest value: a lazy maximum there costs P's small values their precision).
template <int BN, int EXP2_FMA = 0, int STALE_LOG2 = 0>
__device__ __forceinline__ void online_softmax(float (&sc)[BN / 2], int j, int n_k, int q, float scale_log2,
                                               float (&row_max)[2], float (&row_sum)[2], float (&alpha)[2]) {
  if ((j + 1) * BN > n_k) {
#pragma unroll
    for (int i = 0; i < BN / 2; ++i)
      if (j * BN + 8 * (i / 4) + 2 * q + i % 2 >= n_k) sc[i] = kMasked;
  }
  // A row's maximum and sum as CHAINS partial chains (element i joins chain i % 8 / 4 * 2 + i % 2 of row
  // (i / 2) % 2), so the dependent fmax / add chains are BN / 4 / CHAINS long. Four at BN <= 128 (H200: +1 %
  // at D 128); one at BN 256, where the partials' registers cost the D 64 kernel 13 %.
  constexpr int CHAINS = BN <= 128 ? 4 : 1;
  float part_max[2][CHAINS];
#pragma unroll
  for (int r = 0; r < 2; ++r)
#pragma unroll
    for (int k = 0; k < CHAINS; ++k) part_max[r][k] = kMasked;
#pragma unroll
  for (int i = 0; i < BN / 2; ++i) {
    float& m = part_max[(i / 2) % 2][(i % 8 / 4 * 2 + i % 2) % CHAINS];
    m = fmaxf(m, sc[i]);
  }
  float tile_max[2];
#pragma unroll
  for (int r = 0; r < 2; ++r)
    tile_max[r] = combine<CHAINS>(part_max[r], [](float a, float b) { return fmaxf(a, b); });
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    const float tile_log2 = lab_group4_max(tile_max[r]) * scale_log2;
    float m_new;
    if constexpr (STALE_LOG2 == 0) m_new = fmaxf(row_max[r], tile_log2);
    else m_new = tile_log2 > row_max[r] + float(STALE_LOG2) ? tile_log2 : row_max[r];
    alpha[r] = lab_exp2_ftz(row_max[r] - m_new);
    row_max[r] = m_new;
    row_sum[r] *= alpha[r];
  }
  // One chain adds straight into row_sum (the partials' zero starts would cost two FADDs and move ptxas's
  // schedule: D 64 was 4 % slower with them).
  float part_sum[2][CHAINS] = {};
#pragma unroll
  for (int i = 0; i < BN / 2; ++i) {
    const float x = fmaf(sc[i], scale_log2, -row_max[(i / 2) % 2]);
    sc[i] = i % 8 < EXP2_FMA ? exp2_fma(x) : lab_exp2_ftz(x);
    if constexpr (CHAINS == 1) row_sum[(i / 2) % 2] += sc[i];
    else part_sum[(i / 2) % 2][(i % 8 / 4 * 2 + i % 2) % CHAINS] += sc[i];
  }
  if constexpr (CHAINS > 1) {
#pragma unroll
    for (int r = 0; r < 2; ++r)
      row_sum[r] += combine<CHAINS>(part_sum[r], [](float a, float b) { return a + b; });
  }
}

// O = 0 before the first tile.
template <int HEAD_DIM>
__device__ __forceinline__ void zero_output(float (&o)[HEAD_DIM / 2]) {
#pragma unroll
  for (int i = 0; i < HEAD_DIM / 2; ++i) o[i] = 0.f;
}

// O *= alpha, row by row. SKIP_UNMOVED: not when no row of the warp moved its maximum (every alpha 1: the
// lazy maxima of online_softmax make that the common case after the first tiles; the vote keeps the branch
// warp-uniform). The H100 measured the skip without lazy maxima 4 % slower on fp8 and 1 % on the serial D 64
// forward, so only the pipelined 16-bit forward takes it.
template <int HEAD_DIM, bool SKIP_UNMOVED = false>
__device__ __forceinline__ void rescale_output(float (&o)[HEAD_DIM / 2], const float (&alpha)[2]) {
  if (SKIP_UNMOVED && !__any_sync(LAB_FULL_MASK, alpha[0] != 1.f || alpha[1] != 1.f)) return;
#pragma unroll
  for (int i = 0; i < HEAD_DIM / 2; ++i) o[i] *= alpha[(i / 2) % 2];
}

// P rounded to the element type as wgmma's A fragments: accumulator elements 8 kk .. 8 kk + 7 are exactly
// k16 chunk kk's (row g, columns 2q..), (row g + 8, 2q..), (row g, 2q + 8..), (row g + 8, 2q + 8..) pairs.
template <int DT, int BN>
__device__ __forceinline__ void pack_p(const float (&sc)[BN / 2], uint32_t (&pa)[BN / 16][4]) {
#pragma unroll
  for (int kk = 0; kk < BN / 16; ++kk)
#pragma unroll
    for (int r = 0; r < 4; ++r) pa[kk][r] = lab_pack2<DT>(sc[8 * kk + 2 * r], sc[8 * kk + 2 * r + 1]);
}

// O = acc / rowsum rounded to the element type, two columns per 4-byte store; L by one thread per row.
// row0 is the thread's first output row (16 w + g of consumer c's 64).
template <int DT, int HEAD_DIM>
__device__ __forceinline__ void store_outputs(const lab::FlashAttnWgmmaFwdParams& p,
                                              const float (&o)[HEAD_DIM / 2], const float (&row_max)[2],
                                              const float (&row_sum)[2], int bh, int row0, int q) {
  float inv[2];
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

}  // namespace fa_wgmma
