// flash_attn2_mma: Flash Attention 2 in fp16 / bf16 on tensor cores — forward, the backward preprocess
// D = rowsum(dO * O), dQ backward and dK/dV backward. Non-causal. Products run as mma.sync m16n8k16 with
// float accumulation; softmax statistics, L and D stay float32.
//
// Layouts (parameters: flash_attn2_mma_params.cuh; row-major, contiguous, 16-bit elements as uint16_t,
// every row 16-byte aligned):
//   Q, dO, O, dQ   [BH, N_CTX_Q, HEAD_DIM]      K, V, dK, dV   [BH, N_CTX_K, HEAD_DIM]
//   L, D (float)   [BH, N_CTX_Q]   L = logsumexp_j(scale * q_i . k_j) in natural log, D = rowsum(dO * O)
// DT is LAB_F16 or LAB_BF16 (common/lab_mma.cuh); HEAD_DIM is 32, 64, 128 or 256; N_CTX_Q and N_CTX_K are
// arbitrary (tiles are zero-filled past the end and their scores masked).
//
// Work partitioning (WARPS warps per CTA, each warp owns 16 rows of the CTA's block, so BLOCK = 16 * WARPS):
//   forward and dQ: a CTA owns BLOCK query rows and walks the keys in tiles of BN; dK/dV: a CTA owns BLOCK
//   keys and walks the queries in tiles of BM. Tiles go global -> shared memory with cp.async, double
//   buffered (the next tile is in flight while this one is computed; one __syncthreads per tile), at a row
//   stride of HEAD_DIM + 8 elements so the eight 16-byte rows an ldmatrix reads fall in distinct banks.
//   Fragments come from shared memory through ldmatrix (.trans where the operand's reduction dimension runs
//   along memory rows: V in P.V, K in dS.K, dO in P^T.dO, Q in dS^T.Q). A score tile's accumulator registers
//   are, element for element, the A operand of the next product (FA2's register reuse): P, dS and their
//   transposes never touch shared memory. Everything runs in the log2 domain (2^x through ex2.approx.ftz of
//   scores scaled by scale * log2(e) in the same FFMA).
// Precision: P (and dS) are rounded to the element type before their products, O / dQ / dK / dV once at the
// end; every sum is float32.
#include "common/lab.cuh"
#include "common/lab_mma.cuh"
#include "attention/flash_attn2_mma_params.cuh"

namespace fa2h {

constexpr float kLog2e = 1.4426950408889634f;
constexpr float kLn2 = 0.6931471805599453f;
constexpr float kMasked = -1.0e30f;  // score of a row past the end: finite, so max/exp never make NaN

// Shared-memory row stride, in elements, of a tile with HEAD_DIM columns.
__host__ __device__ constexpr int stride(int head_dim) {
  return head_dim + 8;
}

// cp.async of rows [row0, row0 + ROWS) of a row-major [n, D] matrix into a shared tile of stride D + 8;
// rows at or beyond n are zero-filled. THREADS threads share the 16-byte chunks.
template <int ROWS, int D, int THREADS>
__device__ __forceinline__ void load_tile(uint16_t* dst, const uint16_t* src, int row0, int n, int tid) {
  constexpr int kChunksPerRow = D / 8;
#pragma unroll
  for (int c = tid; c < ROWS * kChunksPerRow; c += THREADS) {
    const int r = c / kChunksPerRow, col = (c % kChunksPerRow) * 8;
    const bool valid = row0 + r < n;
    lab_cp_async_16(dst + r * stride(D) + col, src + size_t(valid ? row0 + r : 0) * D + col, valid);
  }
}

// load_tile of the same rows of two matrices (K and V, Q and dO), committed as one cp.async group.
template <int ROWS, int D, int THREADS>
__device__ __forceinline__ void load_tile_pair(uint16_t* dst_a, const uint16_t* a, uint16_t* dst_b,
                                               const uint16_t* b, int row0, int n, int tid) {
  load_tile<ROWS, D, THREADS>(dst_a, a, row0, n, tid);
  load_tile<ROWS, D, THREADS>(dst_b, b, row0, n, tid);
  lab_cp_async_commit();
}

// The start of step j over tiles of two matrices, double buffered (buffer j % 2 of ROWS rows each): waits
// for step j's tiles (cp.async, then the CTA barrier, which also ends every warp's reads of the other buffer)
// and issues step j + 1's into the other buffer.
template <int ROWS, int D, int THREADS>
__device__ __forceinline__ void next_tile_pair(uint16_t* dst_a, const uint16_t* a, uint16_t* dst_b,
                                               const uint16_t* b, int j, int tiles, int n, int tid) {
  lab_cp_async_wait<0>();
  __syncthreads();
  if (j + 1 < tiles) {
    const int next = (j + 1) % 2 * ROWS * stride(D);
    load_tile_pair<ROWS, D, THREADS>(dst_a + next, a, dst_b + next, b, (j + 1) * ROWS, n, tid);
  }
}

// acc[mt][NT][4] += A_mt . B^T for the MT m-tiles of 16 rows of shared tile `a` from row0 (HEAD_DIM
// columns), B's rows being the n index (tile `b`, NT * 8 rows from 0): every B fragment feeds MT products.
template <int DT, int D, int MT, int NT>
__device__ __forceinline__ void mma_a_bt(float (&acc)[MT][NT][4], const uint16_t* a, int row0,
                                         const uint16_t* b, int lane) {
#pragma unroll
  for (int kc = 0; kc < D / 16; ++kc) {
    uint32_t af[MT][4];
#pragma unroll
    for (int mt = 0; mt < MT; ++mt) lab_load_a<stride(D)>(af[mt], a, row0 + 16 * mt, kc * 16, lane);
#pragma unroll
    for (int nt = 0; nt < NT; nt += 2) {
      uint32_t bf[4];
      lab_load_b_rows_n<stride(D)>(bf, b, nt * 8, kc * 16, lane);
#pragma unroll
      for (int mt = 0; mt < MT; ++mt) {
        lab_mma_16816_pair<DT>(acc[mt][nt], acc[mt][nt + 1], af[mt], bf);
      }
    }
  }
}

// The A operand of the k16 chunk kc of a 16-row score tile held as accumulators (n8 tiles 2 kc and
// 2 kc + 1), rounded to DT: the accumulator layout of two n8 tiles is the A layout of one k16 chunk.
template <int DT, int NT>
__device__ __forceinline__ void pack_a(uint32_t (&a)[4], const float (&p)[NT][4], int kc) {
  a[0] = lab_pack2<DT>(p[2 * kc][0], p[2 * kc][1]);
  a[1] = lab_pack2<DT>(p[2 * kc][2], p[2 * kc][3]);
  a[2] = lab_pack2<DT>(p[2 * kc + 1][0], p[2 * kc + 1][1]);
  a[3] = lab_pack2<DT>(p[2 * kc + 1][2], p[2 * kc + 1][3]);
}

// acc[mt][D / 8][4] += P_mt . B for MT m-tiles of P (16 x 16 KC each, held as accumulator-layout floats
// p[mt][2 KC][4], rounded to DT here), B's rows being the reduction index (tile `b`, rows 0.., D columns):
// every B fragment feeds MT products.
template <int DT, int D, int MT, int KC>
__device__ __forceinline__ void mma_p_b(float (&acc)[MT][D / 8][4], const float (&p)[MT][2 * KC][4],
                                        const uint16_t* b, int lane) {
#pragma unroll
  for (int kc = 0; kc < KC; ++kc) {
    uint32_t af[MT][4];
#pragma unroll
    for (int mt = 0; mt < MT; ++mt) pack_a<DT>(af[mt], p[mt], kc);
#pragma unroll
    for (int nt = 0; nt < D / 8; nt += 2) {
      uint32_t bf[4];
      lab_load_b_rows_k<stride(D)>(bf, b, nt * 8, kc * 16, lane);
#pragma unroll
      for (int mt = 0; mt < MT; ++mt) {
        lab_mma_16816_pair<DT>(acc[mt][nt], acc[mt][nt + 1], af[mt], bf);
      }
    }
  }
}

template <int NT>
__device__ __forceinline__ void zero(float (&acc)[NT][4]) {
#pragma unroll
  for (int i = 0; i < NT; ++i) acc[i][0] = acc[i][1] = acc[i][2] = acc[i][3] = 0.f;
}

// Writes a warp's 16 x D accumulator (rows row0 + g and row0 + g + 8) times `scale` to a [n, D] matrix.
template <int DT, int D>
__device__ __forceinline__ void store_rows(uint16_t* dst, const float (&acc)[D / 8][4], int row0, int n,
                                           float scale0, float scale1, int lane) {
  const int g = lane / 4, t = lane % 4;
#pragma unroll
  for (int nt = 0; nt < D / 8; ++nt) {
    const int col = nt * 8 + 2 * t;
    if (row0 + g < n)
      *reinterpret_cast<uint32_t*>(dst + size_t(row0 + g) * D + col) =
          lab_pack2<DT>(acc[nt][0] * scale0, acc[nt][1] * scale0);
    if (row0 + g + 8 < n)
      *reinterpret_cast<uint32_t*>(dst + size_t(row0 + g + 8) * D + col) =
          lab_pack2<DT>(acc[nt][2] * scale1, acc[nt][3] * scale1);
  }
}

}  // namespace fa2h

// Forward. Each warp owns MT m-tiles of 16 query rows (a CTA BLOCK = 16 MT WARPS rows), so every K and V
// fragment read from shared memory feeds MT products. Grid (ceil(N_CTX_Q / BLOCK), BH), block 32 WARPS,
// dynamic shared memory (BLOCK + 4 BN) * (HEAD_DIM + 8) * 2 bytes: the Q block, then K and V tiles, two
// buffers each. Q fragments are re-read from shared memory per tile; the 16 MT x BN score tile and the
// 16 MT x HEAD_DIM output accumulator stay in registers with the running max / sum of the warp's rows (each
// lane a partial sum over its columns, reduced across the group once at the end).
template <int DT, int HEAD_DIM, int WARPS, int MT, int BN>
__global__ void __launch_bounds__(WARPS * 32)
    flash_attn2_fwd_mma(const __grid_constant__ lab::FlashAttn2HalfFwdParams params) {
  const uint16_t* q = params.q;
  const uint16_t* k = params.k;
  const uint16_t* v = params.v;
  uint16_t* o = params.o;
  float* lse = params.lse;
  const int n_q = params.n_q;
  const int n_k = params.n_k;
  const float scale = params.scale;
  using namespace fa2h;
  constexpr int kThreads = WARPS * 32, kBlock = 16 * MT * WARPS, kS = stride(HEAD_DIM);
  LAB_DYNAMIC_SHARED(uint16_t, smem);
  uint16_t* sq = smem;
  uint16_t* sk = sq + kBlock * kS;
  uint16_t* sv = sk + 2 * BN * kS;
  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32, t = lane % 4;
  const int bh = blockIdx.y, m0 = blockIdx.x * kBlock, warp_row = warp * 16 * MT;
  const uint16_t* qh = q + size_t(bh) * n_q * HEAD_DIM;
  const uint16_t* kh = k + size_t(bh) * n_k * HEAD_DIM;
  const uint16_t* vh = v + size_t(bh) * n_k * HEAD_DIM;

  load_tile<kBlock, HEAD_DIM, kThreads>(sq, qh, m0, n_q, tid);
  load_tile_pair<BN, HEAD_DIM, kThreads>(sk, kh, sv, vh, 0, n_k, tid);

  float acc[MT][HEAD_DIM / 8][4];
  float row_max[MT][2], row_sum[MT][2];
#pragma unroll
  for (int mt = 0; mt < MT; ++mt) {
    zero(acc[mt]);
    row_max[mt][0] = row_max[mt][1] = kMasked;
    row_sum[mt][0] = row_sum[mt][1] = 0.f;
  }
  const float scale_log2 = scale * kLog2e;
  const int tiles = (n_k + BN - 1) / BN;
  for (int j = 0; j < tiles; ++j) {
    next_tile_pair<BN, HEAD_DIM, kThreads>(sk, kh, sv, vh, j, tiles, n_k, tid);
    const uint16_t* kt = sk + (j % 2) * BN * kS;
    const uint16_t* vt = sv + (j % 2) * BN * kS;

    float s[MT][BN / 8][4];
#pragma unroll
    for (int mt = 0; mt < MT; ++mt) zero(s[mt]);
    mma_a_bt<DT, HEAD_DIM, MT, BN / 8>(s, sq, warp_row, kt, lane);

    // Online softmax over this tile (rows g: elements 0, 1; rows g + 8: elements 2, 3). The scores stay
    // unscaled until the exponent (scale > 0, so the maximum commutes with it): p = 2^(s * scale_log2 - m) is
    // one FFMA and one MUFU. Keys past n_k (only in the last tile; every row keeps at least one key there)
    // score kMasked, whose exponent is 0. (Skipping the mask on full tiles costs registers: at HEAD_DIM 128
    // ptxas then spills.)
#pragma unroll
    for (int mt = 0; mt < MT; ++mt) {
      float tile_max[2] = {kMasked, kMasked};
#pragma unroll
      for (int nt = 0; nt < BN / 8; ++nt)
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const int key = j * BN + nt * 8 + 2 * t + (e & 1);
          if (key >= n_k) s[mt][nt][e] = kMasked;
          tile_max[e / 2] = fmaxf(tile_max[e / 2], s[mt][nt][e]);
        }
      float alpha[2];
#pragma unroll
      for (int r = 0; r < 2; ++r) {
        const float m_new = fmaxf(row_max[mt][r], lab_group4_max(tile_max[r]) * scale_log2);
        alpha[r] = lab_exp2_ftz(row_max[mt][r] - m_new);
        row_max[mt][r] = m_new;
        row_sum[mt][r] *= alpha[r];
      }
#pragma unroll
      for (int nt = 0; nt < BN / 8; ++nt)
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          s[mt][nt][e] = lab_exp2_ftz(fmaf(s[mt][nt][e], scale_log2, -row_max[mt][e / 2]));
          row_sum[mt][e / 2] += s[mt][nt][e];
        }
#pragma unroll
      for (int nt = 0; nt < HEAD_DIM / 8; ++nt)
#pragma unroll
        for (int e = 0; e < 4; ++e) acc[mt][nt][e] *= alpha[e / 2];
    }

    mma_p_b<DT, HEAD_DIM, MT, BN / 16>(acc, s, vt, lane);  // O += P . V
  }

  const int g = lane / 4;
  float* lh = lse + size_t(bh) * n_q;
#pragma unroll
  for (int mt = 0; mt < MT; ++mt) {
    const float sum0 = lab_group4_sum(row_sum[mt][0]), sum1 = lab_group4_sum(row_sum[mt][1]);
    const int row0 = m0 + warp_row + 16 * mt;
    store_rows<DT, HEAD_DIM>(o + size_t(bh) * n_q * HEAD_DIM, acc[mt], row0, n_q, 1.f / sum0, 1.f / sum1,
                             lane);
    if (t == 0 && row0 + g < n_q) lh[row0 + g] = (row_max[mt][0] + log2f(sum0)) * kLn2;
    if (t == 0 && row0 + g + 8 < n_q) lh[row0 + g + 8] = (row_max[mt][1] + log2f(sum1)) * kLn2;
  }
}

// Backward preprocess: D[row] = sum_d dO[row, d] * O[row, d] in float. HEAD_DIM / 8 lanes per row, each
// reading 8 elements (16 bytes) of both; 128 threads, grid ceil(rows / (128 / (HEAD_DIM / 8))).
template <int DT, int HEAD_DIM>
__global__ void flash_attn2_bwd_preprocess_mma(
    const __grid_constant__ lab::FlashAttn2HalfPreprocessParams params) {
  const uint16_t* o = params.o;
  const uint16_t* d_o = params.d_o;
  float* delta = params.delta;
  const int rows = params.rows;
  constexpr int kLanes = HEAD_DIM / 8, kRowsPerCta = 128 / kLanes;
  const int lane = threadIdx.x % kLanes;
  const int row = blockIdx.x * kRowsPerCta + threadIdx.x / kLanes;
  float sum = 0.f;
  if (row < rows) {
    const uint4 ov = *reinterpret_cast<const uint4*>(o + size_t(row) * HEAD_DIM + lane * 8);
    const uint4 dv = *reinterpret_cast<const uint4*>(d_o + size_t(row) * HEAD_DIM + lane * 8);
    const uint32_t ow[4] = {ov.x, ov.y, ov.z, ov.w}, dw[4] = {dv.x, dv.y, dv.z, dv.w};
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      sum += lab_to_float<DT>(uint16_t(ow[i] & 0xffffu)) * lab_to_float<DT>(uint16_t(dw[i] & 0xffffu));
      sum += lab_to_float<DT>(uint16_t(ow[i] >> 16)) * lab_to_float<DT>(uint16_t(dw[i] >> 16));
    }
  }
#pragma unroll
  for (int offset = kLanes / 2; offset > 0; offset >>= 1) sum += __shfl_xor_sync(LAB_FULL_MASK, sum, offset);
  if (row < rows && lane == 0) delta[row] = sum;
}

// dQ = scale * sum_j dS_ij k_j with dS = P * (dP - D), P = exp2(S log2e - L log2e), dP = dO V^T. Each warp
// owns MT m-tiles of 16 query rows (BLOCK = 16 MT WARPS). Grid (ceil(N_CTX_Q / BLOCK), BH), block 32 WARPS,
// dynamic shared memory (2 BLOCK + 4 BN) * (HEAD_DIM + 8) * 2 bytes: the Q and dO blocks, then K and V
// tiles, two buffers each. Per key tile a warp computes S and dP (16 MT x BN each), then dS, then
// dQ += dS . K (K transposed), every K / V fragment shared by the MT m-tiles.
template <int DT, int HEAD_DIM, int WARPS, int MT, int BN>
__global__ void __launch_bounds__(WARPS * 32)
    flash_attn2_bwd_dq_mma(const __grid_constant__ lab::FlashAttn2HalfDqParams params) {
  const uint16_t* q = params.q;
  const uint16_t* k = params.k;
  const uint16_t* v = params.v;
  const uint16_t* d_o = params.d_o;
  const float* lse = params.lse;
  const float* delta = params.delta;
  uint16_t* dq = params.dq;
  const int n_q = params.n_q;
  const int n_k = params.n_k;
  const float scale = params.scale;
  using namespace fa2h;
  constexpr int kThreads = WARPS * 32, kBlock = 16 * MT * WARPS, kS = stride(HEAD_DIM);
  LAB_DYNAMIC_SHARED(uint16_t, smem);
  uint16_t* sq = smem;
  uint16_t* sdo = sq + kBlock * kS;
  uint16_t* sk = sdo + kBlock * kS;
  uint16_t* sv = sk + 2 * BN * kS;
  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32, g = lane / 4, t = lane % 4;
  const int bh = blockIdx.y, m0 = blockIdx.x * kBlock, warp_row = warp * 16 * MT;
  const size_t q_off = size_t(bh) * n_q * HEAD_DIM, k_off = size_t(bh) * n_k * HEAD_DIM;

  load_tile<kBlock, HEAD_DIM, kThreads>(sq, q + q_off, m0, n_q, tid);
  load_tile<kBlock, HEAD_DIM, kThreads>(sdo, d_o + q_off, m0, n_q, tid);
  load_tile_pair<BN, HEAD_DIM, kThreads>(sk, k + k_off, sv, v + k_off, 0, n_k, tid);

  // L (log2 domain) and D of rows g and g + 8 of each m-tile; rows past the end read 0 (not stored).
  float row_l[MT][2], row_d[MT][2];
  float acc[MT][HEAD_DIM / 8][4];
#pragma unroll
  for (int mt = 0; mt < MT; ++mt) {
    zero(acc[mt]);
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      const int row = m0 + warp_row + 16 * mt + g + 8 * r;
      row_l[mt][r] = row < n_q ? lse[size_t(bh) * n_q + row] * kLog2e : 0.f;
      row_d[mt][r] = row < n_q ? delta[size_t(bh) * n_q + row] : 0.f;
    }
  }
  const float scale_log2 = scale * kLog2e;
  const int tiles = (n_k + BN - 1) / BN;
  for (int j = 0; j < tiles; ++j) {
    next_tile_pair<BN, HEAD_DIM, kThreads>(sk, k + k_off, sv, v + k_off, j, tiles, n_k, tid);
    const uint16_t* kt = sk + (j % 2) * BN * kS;
    const uint16_t* vt = sv + (j % 2) * BN * kS;

    float s[MT][BN / 8][4], dp[MT][BN / 8][4];
#pragma unroll
    for (int mt = 0; mt < MT; ++mt) zero(s[mt]), zero(dp[mt]);
    mma_a_bt<DT, HEAD_DIM, MT, BN / 8>(s, sq, warp_row, kt, lane);
    mma_a_bt<DT, HEAD_DIM, MT, BN / 8>(dp, sdo, warp_row, vt, lane);
#pragma unroll
    for (int mt = 0; mt < MT; ++mt)
#pragma unroll
      for (int nt = 0; nt < BN / 8; ++nt)
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const int key = j * BN + nt * 8 + 2 * t + (e & 1);
          const float p = key < n_k ? lab_exp2_ftz(fmaf(s[mt][nt][e], scale_log2, -row_l[mt][e / 2])) : 0.f;
          s[mt][nt][e] = p * (dp[mt][nt][e] - row_d[mt][e / 2]);  // dS
        }
    mma_p_b<DT, HEAD_DIM, MT, BN / 16>(acc, s, kt, lane);  // dQ += dS . K
  }
#pragma unroll
  for (int mt = 0; mt < MT; ++mt)
    store_rows<DT, HEAD_DIM>(dq + q_off, acc[mt], m0 + warp_row + 16 * mt, n_q, scale, scale, lane);
}

// dK = scale * sum_i dS_ij q_i and dV = sum_i P_ij dO_i. Grid (ceil(N_CTX_K / (16 WARPS)), BH), block
// 32 WARPS, dynamic shared memory (2 * 16 WARPS + 4 BM) * (HEAD_DIM + 8) * 2 + 4 * BM * 4 bytes: the K and
// V blocks, the Q and dO tiles (two buffers each), then L (log2 domain) and D of the tile's queries (two
// buffers each). Per query tile a warp computes S^T = K Q^T and dP^T = V dO^T (16 keys x BM queries), then
// P^T and dS^T, then dV += P^T . dO and dK += dS^T . Q (dO and Q transposed).
// FUSED_DQ: the kernel also produces dQ (the split variant's dQ kernel is then not launched): after each
// query tile, dS^T goes to shared memory (rounded to DT), the CTA computes dS . K for the tile's BM queries
// over its 16 WARPS keys (warp w: m-tile w % (BM / 16), a HEAD_DIM * (BM / 16) / WARPS column slice; A read
// with ldmatrix.trans from the dS^T tile) and adds it into the float accumulator dq_acc [BH, N_CTX_Q,
// HEAD_DIM] with atomicAdd (zeroed before, scaled and rounded by flash_attn2_bwd_dq_convert_mma after).
// That saves recomputing S and dP for dQ (5 products per tile pair instead of 7) at the price of
// N_CTX_K / (16 WARPS) float atomics per dQ element. Extra shared memory: 16 WARPS * (BM + 8) * 2 bytes.
template <int DT, int HEAD_DIM, int WARPS, int BM, bool FUSED_DQ>
__global__ void __launch_bounds__(WARPS * 32)
    flash_attn2_bwd_dkdv_mma(const __grid_constant__ lab::FlashAttn2HalfDkdvParams params) {
  const uint16_t* q = params.q;
  const uint16_t* k = params.k;
  const uint16_t* v = params.v;
  const uint16_t* d_o = params.d_o;
  const float* lse = params.lse;
  const float* delta = params.delta;
  uint16_t* dk = params.dk;
  uint16_t* dv = params.dv;
  float* dq_acc = params.dq_acc;
  const int n_q = params.n_q;
  const int n_k = params.n_k;
  const float scale = params.scale;
  using namespace fa2h;
  constexpr int kThreads = WARPS * 32, kBlock = 16 * WARPS, kS = stride(HEAD_DIM);
  // FUSED_DQ: the dS^T tile's row stride, the query m-tiles and the dQ columns of each warp.
  constexpr int kSds = BM + 8, kMq = BM / 16, kCols = HEAD_DIM * kMq / WARPS;
  static_assert(!FUSED_DQ || (WARPS % kMq == 0 && kCols % 16 == 0),
                "fused dQ: the warps must split the BM x HEAD_DIM tile into 16-row, 16k-column slices");
  LAB_DYNAMIC_SHARED(uint16_t, smem);
  uint16_t* sk = smem;
  uint16_t* sv = sk + kBlock * kS;
  uint16_t* sq = sv + kBlock * kS;
  uint16_t* sdo = sq + 2 * BM * kS;
  float* sl = reinterpret_cast<float*>(sdo + 2 * BM * kS);
  float* sd = sl + 2 * BM;
  uint16_t* sds = reinterpret_cast<uint16_t*>(sd + 2 * BM);
  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32, t = lane % 4;
  const int bh = blockIdx.y, n0 = blockIdx.x * kBlock, key0 = n0 + warp * 16;
  const size_t q_off = size_t(bh) * n_q * HEAD_DIM, k_off = size_t(bh) * n_k * HEAD_DIM;
  const float* lh = lse + size_t(bh) * n_q;
  const float* dh = delta + size_t(bh) * n_q;

  load_tile<kBlock, HEAD_DIM, kThreads>(sk, k + k_off, n0, n_k, tid);
  load_tile<kBlock, HEAD_DIM, kThreads>(sv, v + k_off, n0, n_k, tid);
  load_tile_pair<BM, HEAD_DIM, kThreads>(sq, q + q_off, sdo, d_o + q_off, 0, n_q, tid);
  for (int i = tid; i < BM; i += kThreads) {
    sl[i] = i < n_q ? lh[i] * kLog2e : 0.f;
    sd[i] = i < n_q ? dh[i] : 0.f;
  }

  float acc_k[1][HEAD_DIM / 8][4], acc_v[1][HEAD_DIM / 8][4];  // one m-tile of 16 keys per warp
  zero(acc_k[0]);
  zero(acc_v[0]);
  const float scale_log2 = scale * kLog2e;
  const int tiles = (n_q + BM - 1) / BM;
  for (int j = 0; j < tiles; ++j) {
    next_tile_pair<BM, HEAD_DIM, kThreads>(sq, q + q_off, sdo, d_o + q_off, j, tiles, n_q, tid);
    if (j + 1 < tiles) {  // L and D of the next query tile
      const int next = (j + 1) % 2, q1 = (j + 1) * BM;
      for (int i = tid; i < BM; i += kThreads) {
        sl[next * BM + i] = q1 + i < n_q ? lh[q1 + i] * kLog2e : 0.f;
        sd[next * BM + i] = q1 + i < n_q ? dh[q1 + i] : 0.f;
      }
    }
    const uint16_t* qt = sq + (j % 2) * BM * kS;
    const uint16_t* dot = sdo + (j % 2) * BM * kS;
    const float* lt = sl + (j % 2) * BM;
    const float* dt = sd + (j % 2) * BM;

    float st[1][BM / 8][4], dpt[1][BM / 8][4];
    zero(st[0]);
    zero(dpt[0]);
    mma_a_bt<DT, HEAD_DIM, 1, BM / 8>(st, sk, warp * 16, qt, lane);
    mma_a_bt<DT, HEAD_DIM, 1, BM / 8>(dpt, sv, warp * 16, dot, lane);
#pragma unroll
    for (int nt = 0; nt < BM / 8; ++nt)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int col = nt * 8 + 2 * t + (e & 1);  // query within the tile
        const float p = j * BM + col < n_q ? lab_exp2_ftz(fmaf(st[0][nt][e], scale_log2, -lt[col])) : 0.f;
        st[0][nt][e] = p;
        dpt[0][nt][e] = p * (dpt[0][nt][e] - dt[col]);  // dS^T
      }
    mma_p_b<DT, HEAD_DIM, 1, BM / 16>(acc_v, st, dot, lane);
    mma_p_b<DT, HEAD_DIM, 1, BM / 16>(acc_k, dpt, qt, lane);
    if constexpr (FUSED_DQ) {
      const int g = lane / 4;
#pragma unroll
      for (int nt = 0; nt < BM / 8; ++nt) {
        uint16_t* row = sds + (warp * 16 + g) * kSds + nt * 8 + 2 * t;
        *reinterpret_cast<uint32_t*>(row) = lab_pack2<DT>(dpt[0][nt][0], dpt[0][nt][1]);
        *reinterpret_cast<uint32_t*>(row + 8 * kSds) = lab_pack2<DT>(dpt[0][nt][2], dpt[0][nt][3]);
      }
      __syncthreads();
      const int mq = warp % kMq, c0 = (warp / kMq) * kCols;
      float dqa[kCols / 8][4];
      zero(dqa);
#pragma unroll
      for (int kc = 0; kc < kBlock / 16; ++kc) {
        uint32_t af[4];  // dS (queries x keys) = the transposed dS^T tile
        lab_ldmatrix_x4_trans(
            af, sds + (kc * 16 + lane % 8 + (lane / 16) * 8) * kSds + mq * 16 + ((lane / 8) % 2) * 8);
#pragma unroll
        for (int nt = 0; nt < kCols / 8; nt += 2) {
          uint32_t bf[4];
          lab_load_b_rows_k<stride(HEAD_DIM)>(bf, sk, c0 + nt * 8, kc * 16, lane);
          lab_mma_16816_pair<DT>(dqa[nt], dqa[nt + 1], af, bf);
        }
      }
      float* acc_rows = dq_acc + size_t(bh) * n_q * HEAD_DIM;
#pragma unroll
      for (int nt = 0; nt < kCols / 8; ++nt)
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const int row = j * BM + mq * 16 + g + 8 * (e / 2), col = c0 + nt * 8 + 2 * t + (e & 1);
          if (row < n_q) atomicAdd(acc_rows + size_t(row) * HEAD_DIM + col, dqa[nt][e]);
        }
    }
  }
  store_rows<DT, HEAD_DIM>(dk + k_off, acc_k[0], key0, n_k, scale, scale, lane);
  store_rows<DT, HEAD_DIM>(dv + k_off, acc_v[0], key0, n_k, 1.f, 1.f, lane);
}

// The fused variant's last step: dq = DT(scale * dq_acc), two elements per thread, grid-stride over count
// (even) elements.
template <int DT>
__global__ void flash_attn2_bwd_dq_convert_mma(
    const __grid_constant__ lab::FlashAttn2HalfDqConvertParams params) {
  const float* dq_acc = params.dq_acc;
  uint16_t* dq = params.dq;
  const int count = params.count;
  const float scale = params.scale;
  for (int i = 2 * (blockIdx.x * blockDim.x + threadIdx.x); i < count; i += 2 * gridDim.x * blockDim.x)
    *reinterpret_cast<uint32_t*>(dq + i) = lab_pack2<DT>(dq_acc[i] * scale, dq_acc[i + 1] * scale);
}
