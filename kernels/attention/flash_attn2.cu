// flash_attn2: Flash Attention 2 in float32 — forward, the backward preprocess D = rowsum(dO * O), dQ
// backward, dK/dV backward, and the attention-probabilities op for visualisation. Non-causal.
//
// Layouts (parameters: flash_attn2_params.cuh; row-major, contiguous, every pointer 16-byte aligned):
//   Q, dO, O, dQ   [BH, N_CTX_Q, HEAD_DIM]      (BH = BATCH * N_HEADS)
//   K, V, dK, dV   [BH, N_CTX_K, HEAD_DIM]
//   L, D           [BH, N_CTX_Q]   L = logsumexp_j(scale * q_i . k_j) in natural log (saved by the forward),
//                                  D = rowsum(dO * O) (the preprocess)
//   P (probs op)   [R, N_CTX_K]    P[r, j] = exp(scale * q_rows[r] . k_j - L_rows[r]) for one head `bh`
// HEAD_DIM is a template parameter (16, 32, 64, 128 or 256); N_CTX_Q and N_CTX_K are arbitrary (tiles are
// masked at their edges). The N_CTX_Q x N_CTX_K matrix is never materialised.
//
// Variants (every one is checked against the same float64 reference):
//   row_per_cta — the seed's design, the baseline. Forward and dQ: one CTA of 128 threads per (query row,
//     bh), grid (N_CTX_Q, BH): each thread scores one key of a 128-key tile (a block-wide max/sum does the
//     online softmax), then threads over HEAD_DIM accumulate P.V (or dS.K), one column each (two at 256).
//     dK/dV: one CTA per (key row, bh), the same with the roles of queries and keys swapped. Preprocess: one
//     warp per row, grid (BH * N_CTX_Q). Probs: one CTA per selected row.
//   tiled — the FA2 work partitioning, the default. 128 threads = 8 row groups (ty) x 16 column lanes (tx);
//     a CTA owns BLOCK_M rows (queries for the forward and dQ, keys for dK/dV), thread (ty, tx) rows
//     ty + 8i (i < BLOCK_M / 8), so the 16 lanes sharing a row are one half-warp and the row statistics
//     reduce with 4 shuffles. Per tile of BLOCK_N keys (queries for dK/dV; 64, 32 at HEAD_DIM 128, 16 at
//     256): the tile is staged global -> registers -> shared memory (the next tile's loads are issued before
//     this tile's math, hiding their latency), scores are a register-blocked (BLOCK_M/8) x (BLOCK_N/16)
//     micro-tile per thread read as float4 rows of padded shared tiles (stride HEAD_DIM + 4: conflict-free),
//     the probabilities go through a per-warp shared tile, and the output accumulator, HEAD_DIM/16 columns x
//     BLOCK_M/8 rows per thread, stays in registers. Grid (ceil(rows / BLOCK_M), BH), block 128, dynamic
//     shared memory fa2_tiled_*_smem_floats() * 4 bytes (may exceed 48 KiB). BLOCK_M is a template parameter
//     (16, 32, 64): small problems (yolo26n: BH = 2, N = 400) take 16 to fill more SMs. Preprocess:
//     HEAD_DIM/4 lanes per row (float4; 32 lanes of two float4s at 256), 128 threads. Probs: CTA per (64
//     keys, 16 at HEAD_DIM 256; 16 selected rows), grid (ceil(N_CTX_K / keys), ceil(R/16)).
// Backward math (S = scale Q K^T, P = exp(S - L)): dV = P^T dO, dP = dO V^T, dS = P * (dP - D),
// dQ = scale dS K, dK = scale dS^T Q. Everything runs in the log2 domain internally (exp2f of pre-scaled
// scores).
#include "common/lab.cuh"
#include "attention/flash_attn2_params.cuh"

namespace fa2 {

constexpr float kLog2e = 1.4426950408889634f;
constexpr float kLn2 = 0.6931471805599453f;
constexpr float kMasked = -1.0e30f;  // score of a key beyond N_CTX_K: finite, so max/exp never make NaN
constexpr int kThreads = 128;        // every kernel of this file
constexpr int kRowGroups = 8;        // tiled: ty in [0, 8)
constexpr int kColLanes = 16;        // tiled: tx in [0, 16)

__host__ __device__ constexpr int block_n(int head_dim) {
  return head_dim >= 256 ? 16 : head_dim == 128 ? 32 : 64;
}
// Keys per CTA of the tiled probs op: 16 at HEAD_DIM 256 keeps its static tiles under 48 KiB.
__host__ __device__ constexpr int probs_block_n(int head_dim) {
  return head_dim >= 256 ? 16 : 64;
}
// row_per_cta: the columns of a HEAD_DIM row a thread owns, tid + 128 c for c < row_cols(HEAD_DIM) (one up to
// HEAD_DIM 128, two at 256).
__host__ __device__ constexpr int row_cols(int head_dim) {
  return (head_dim + kThreads - 1) / kThreads;
}
__host__ __device__ constexpr int tile_stride(int head_dim) {
  return head_dim + 4;
}
__host__ __device__ constexpr int prob_stride(int block_cols) {
  return block_cols + 16;
}

// Reductions over the 16 lanes of a half-warp (the column lanes of one row group).
__device__ __forceinline__ float group16_max(float v) {
  for (int offset = 8; offset > 0; offset >>= 1) v = fmaxf(v, __shfl_xor_sync(LAB_FULL_MASK, v, offset));
  return v;
}
__device__ __forceinline__ float group16_sum(float v) {
  for (int offset = 8; offset > 0; offset >>= 1) v += __shfl_xor_sync(LAB_FULL_MASK, v, offset);
  return v;
}

// A ROWS x D tile of a row-major [n, D] matrix held in registers, spread over the CTA as float4s; rows at or
// beyond `n` read as zeros. `load` only issues global loads; `store` writes shared memory at a row stride.
template <int ROWS, int D>
struct TileStage {
  static constexpr int kVecsPerRow = D / 4;
  static constexpr int kVecs = ROWS * kVecsPerRow;
  static constexpr int kPerThread = (kVecs + kThreads - 1) / kThreads;
  float4 v[kPerThread];

  __device__ __forceinline__ void load(const float* src, int row0, int n, int tid) {
#pragma unroll
    for (int k = 0; k < kPerThread; ++k) {
      const int idx = tid + k * kThreads;
      const int row = row0 + idx / kVecsPerRow;
      v[k] = make_float4(0.f, 0.f, 0.f, 0.f);
      if (idx < kVecs && row < n)
        v[k] = *reinterpret_cast<const float4*>(src + size_t(row) * D + 4 * (idx % kVecsPerRow));
    }
  }
  __device__ __forceinline__ void store(float* dst, int stride, int tid) const {
#pragma unroll
    for (int k = 0; k < kPerThread; ++k) {
      const int idx = tid + k * kThreads;
      if (idx < kVecs)
        *reinterpret_cast<float4*>(dst + (idx / kVecsPerRow) * stride + 4 * (idx % kVecsPerRow)) = v[k];
    }
  }
};

// acc[i][c] = A[ty + 8i] . B[tx + 16c] over D, A and B shared tiles of row stride `stride`.
template <int RPT, int CPT, int D>
__device__ __forceinline__ void tile_dot(const float* a, const float* b, int stride, int ty, int tx,
                                         float (&acc)[RPT][CPT]) {
#pragma unroll
  for (int i = 0; i < RPT; ++i)
#pragma unroll
    for (int c = 0; c < CPT; ++c) acc[i][c] = 0.f;
#pragma unroll 4
  for (int d = 0; d < D; d += 4) {
    float4 av[RPT], bv[CPT];
#pragma unroll
    for (int i = 0; i < RPT; ++i)
      av[i] = *reinterpret_cast<const float4*>(a + (ty + kRowGroups * i) * stride + d);
#pragma unroll
    for (int c = 0; c < CPT; ++c)
      bv[c] = *reinterpret_cast<const float4*>(b + (tx + kColLanes * c) * stride + d);
#pragma unroll
    for (int i = 0; i < RPT; ++i)
#pragma unroll
      for (int c = 0; c < CPT; ++c) {
        acc[i][c] += av[i].x * bv[c].x;
        acc[i][c] += av[i].y * bv[c].y;
        acc[i][c] += av[i].z * bv[c].z;
        acc[i][c] += av[i].w * bv[c].w;
      }
  }
}

// The HEAD_DIM columns a thread owns in an output accumulator: DPT = D/16 columns in groups of VW contiguous
// floats, column (g, w) = g * 16 * VW + tx * VW + w, so a half-warp reads VW * 16 contiguous floats per
// group.
template <int D>
struct OutCols {
  static constexpr int kPerThread = D / 16;
  static constexpr int kWidth = kPerThread < 4 ? kPerThread : 4;
  static constexpr int kGroups = kPerThread / kWidth;
  __device__ __forceinline__ static int col(int e, int tx) {
    return (e / kWidth) * kColLanes * kWidth + tx * kWidth + e % kWidth;
  }
};

// Reads the thread's DPT columns of row `row` of a shared or global row-major matrix into `out`.
template <int D>
__device__ __forceinline__ void read_cols(const float* row, int tx, float (&out)[D / 16]) {
  using C = OutCols<D>;
#pragma unroll
  for (int g = 0; g < C::kGroups; ++g) {
    const float* p = row + g * kColLanes * C::kWidth + tx * C::kWidth;
    if constexpr (C::kWidth == 4) {
      const float4 x = *reinterpret_cast<const float4*>(p);
      out[4 * g] = x.x, out[4 * g + 1] = x.y, out[4 * g + 2] = x.z, out[4 * g + 3] = x.w;
    } else if constexpr (C::kWidth == 2) {
      const float2 x = *reinterpret_cast<const float2*>(p);
      out[2 * g] = x.x, out[2 * g + 1] = x.y;
    } else {
      out[g] = p[0];
    }
  }
}

// Writes `scale * val` to the thread's DPT columns of a global row.
template <int D>
__device__ __forceinline__ void write_cols(float* row, int tx, const float (&val)[D / 16], float scale) {
  using C = OutCols<D>;
#pragma unroll
  for (int g = 0; g < C::kGroups; ++g) {
    float* p = row + g * kColLanes * C::kWidth + tx * C::kWidth;
    if constexpr (C::kWidth == 4) {
      *reinterpret_cast<float4*>(p) = make_float4(val[4 * g] * scale, val[4 * g + 1] * scale,
                                                  val[4 * g + 2] * scale, val[4 * g + 3] * scale);
    } else if constexpr (C::kWidth == 2) {
      *reinterpret_cast<float2*>(p) = make_float2(val[2 * g] * scale, val[2 * g + 1] * scale);
    } else {
      p[0] = val[g] * scale;
    }
  }
}

// acc[i][:] += sum_{j < COLS} P[ty + 8i][j] * M[j][thread's columns]; P of row stride p_stride, M of
// m_stride.
template <int RPT, int D, int COLS>
__device__ __forceinline__ void tile_accumulate(const float* p, int p_stride, const float* m, int m_stride,
                                                int ty, int tx, float (&acc)[RPT][D / 16]) {
#pragma unroll 2
  for (int j = 0; j < COLS; j += 4) {
    float4 pv[RPT];
#pragma unroll
    for (int i = 0; i < RPT; ++i)
      pv[i] = *reinterpret_cast<const float4*>(p + (ty + kRowGroups * i) * p_stride + j);
#pragma unroll
    for (int jj = 0; jj < 4; ++jj) {
      float mv[D / 16];
      read_cols<D>(m + (j + jj) * m_stride, tx, mv);
#pragma unroll
      for (int i = 0; i < RPT; ++i) {
        const float pij = jj == 0 ? pv[i].x : jj == 1 ? pv[i].y : jj == 2 ? pv[i].z : pv[i].w;
#pragma unroll
        for (int e = 0; e < D / 16; ++e) acc[i][e] += pij * mv[e];
      }
    }
  }
}

// Dot product of a shared row and a global row, float4 at a time.
template <int D>
__device__ __forceinline__ float row_dot(const float* shared_row, const float* global_row) {
  float s = 0.f;
#pragma unroll 4
  for (int d = 0; d < D; d += 4) {
    const float4 a = *reinterpret_cast<const float4*>(shared_row + d);
    const float4 b = *reinterpret_cast<const float4*>(global_row + d);
    s += a.x * b.x;
    s += a.y * b.y;
    s += a.z * b.z;
    s += a.w * b.w;
  }
  return s;
}

// Block-wide (128 threads) reductions for the row_per_cta variant; `scratch` holds 4 floats.
__device__ __forceinline__ float block_max(float v, float* scratch) {
  v = lab_warp_max(v);
  __syncthreads();
  if (threadIdx.x % 32 == 0) scratch[threadIdx.x / 32] = v;
  __syncthreads();
  return fmaxf(fmaxf(scratch[0], scratch[1]), fmaxf(scratch[2], scratch[3]));
}
__device__ __forceinline__ float block_sum(float v, float* scratch) {
  v = lab_warp_sum(v);
  __syncthreads();
  if (threadIdx.x % 32 == 0) scratch[threadIdx.x / 32] = v;
  __syncthreads();
  return (scratch[0] + scratch[1]) + (scratch[2] + scratch[3]);
}

}  // namespace fa2

// Shared-memory sizes (floats) of the tiled kernels; the runner computes the same numbers on the host.
__host__ __device__ constexpr int fa2_tiled_fwd_smem_floats(int head_dim, int block_m) {
  return (block_m + fa2::block_n(head_dim)) * fa2::tile_stride(head_dim) + fa2::block_n(head_dim) * head_dim +
         block_m * fa2::prob_stride(fa2::block_n(head_dim));
}
__host__ __device__ constexpr int fa2_tiled_dq_smem_floats(int head_dim, int block_m) {
  return 2 * (block_m + fa2::block_n(head_dim)) * fa2::tile_stride(head_dim) +
         block_m * fa2::prob_stride(fa2::block_n(head_dim));
}
__host__ __device__ constexpr int fa2_tiled_dkdv_smem_floats(int head_dim, int block_m) {
  return 2 * (block_m + fa2::block_n(head_dim)) * fa2::tile_stride(head_dim) + 2 * fa2::block_n(head_dim) +
         2 * block_m * fa2::prob_stride(fa2::block_n(head_dim));
}

// ---------------------------------------------------------------------------------------------------------
// Forward. O[i] = sum_j softmax_j(scale q_i . k_j) v_j; L[i] = logsumexp_j(scale q_i . k_j).

template <int HEAD_DIM>
__global__ void flash_attn2_fwd_row_per_cta(const __grid_constant__ lab::FlashAttn2FwdParams params) {
  const float* __restrict__ q = params.q;
  const float* __restrict__ k = params.k;
  const float* __restrict__ v = params.v;
  float* __restrict__ o = params.o;
  float* __restrict__ lse = params.lse;
  const int n_q = params.n_q;
  const int n_k = params.n_k;
  const float scale = params.scale;
  constexpr int D = HEAD_DIM, CPT = fa2::row_cols(D);
  __shared__ __align__(16) float q_s[D];
  __shared__ float p_s[fa2::kThreads];
  __shared__ float scratch[4];
  const int tid = threadIdx.x, row = blockIdx.x, bh = blockIdx.y;
  const float* k_bh = k + size_t(bh) * n_k * D;
  const float* v_bh = v + size_t(bh) * n_k * D;
#pragma unroll
  for (int cc = 0; cc < CPT; ++cc) {
    const int d = tid + fa2::kThreads * cc;
    if (d < D) q_s[d] = q[(size_t(bh) * n_q + row) * D + d];
  }
  __syncthreads();
  const float c = scale * fa2::kLog2e;
  float m = fa2::kMasked, l = 0.f, acc[CPT];
#pragma unroll
  for (int cc = 0; cc < CPT; ++cc) acc[cc] = 0.f;
  for (int j0 = 0; j0 < n_k; j0 += fa2::kThreads) {
    const int j = j0 + tid;
    const float s = j < n_k ? fa2::row_dot<D>(q_s, k_bh + size_t(j) * D) * c : fa2::kMasked;
    const float m_new = fmaxf(m, fa2::block_max(s, scratch));
    const float p = j < n_k ? exp2f(s - m_new) : 0.f;
    p_s[tid] = p;
    const float alpha = exp2f(m - m_new);
    l = l * alpha + fa2::block_sum(p, scratch);  // its barriers also publish p_s
    m = m_new;
#pragma unroll
    for (int cc = 0; cc < CPT; ++cc) {
      const int d = tid + fa2::kThreads * cc;
      if (d < D) {
        const int count = n_k - j0 < fa2::kThreads ? n_k - j0 : fa2::kThreads;
        float pv = 0.f;
        for (int jj = 0; jj < count; ++jj) pv += p_s[jj] * v_bh[size_t(j0 + jj) * D + d];
        acc[cc] = acc[cc] * alpha + pv;
      }
    }
    __syncthreads();  // p_s is rewritten by the next tile
  }
#pragma unroll
  for (int cc = 0; cc < CPT; ++cc) {
    const int d = tid + fa2::kThreads * cc;
    if (d < D) o[(size_t(bh) * n_q + row) * D + d] = acc[cc] / l;
  }
  if (tid == 0) lse[size_t(bh) * n_q + row] = m * fa2::kLn2 + logf(l);
}

template <int HEAD_DIM, int BLOCK_M>
__global__ void flash_attn2_fwd_tiled(const __grid_constant__ lab::FlashAttn2FwdParams params) {
  const float* __restrict__ q = params.q;
  const float* __restrict__ k = params.k;
  const float* __restrict__ v = params.v;
  float* __restrict__ o = params.o;
  float* __restrict__ lse = params.lse;
  const int n_q = params.n_q;
  const int n_k = params.n_k;
  const float scale = params.scale;
  constexpr int D = HEAD_DIM, BN = fa2::block_n(D), RPT = BLOCK_M / fa2::kRowGroups;
  constexpr int CPT = BN / fa2::kColLanes, DPT = D / 16;
  constexpr int TS = fa2::tile_stride(D), PS = fa2::prob_stride(BN);
  LAB_DYNAMIC_SHARED(float, smem);
  float* q_s = smem;                // [BLOCK_M][TS]
  float* k_s = q_s + BLOCK_M * TS;  // [BN][TS]
  float* v_s = k_s + BN * TS;       // [BN][D]
  float* p_s = v_s + BN * D;        // [BLOCK_M][PS]
  const int tid = threadIdx.x, ty = tid / fa2::kColLanes, tx = tid % fa2::kColLanes;
  const int bh = blockIdx.y, m0 = blockIdx.x * BLOCK_M;
  q += size_t(bh) * n_q * D;
  k += size_t(bh) * n_k * D;
  v += size_t(bh) * n_k * D;

  {
    fa2::TileStage<BLOCK_M, D> q_tile;
    q_tile.load(q, m0, n_q, tid);
    q_tile.store(q_s, TS, tid);
  }
  fa2::TileStage<BN, D> k_tile, v_tile;
  k_tile.load(k, 0, n_k, tid);
  v_tile.load(v, 0, n_k, tid);

  float acc[RPT][DPT], m_run[RPT], l_run[RPT];
#pragma unroll
  for (int i = 0; i < RPT; ++i) {
    m_run[i] = fa2::kMasked, l_run[i] = 0.f;
#pragma unroll
    for (int e = 0; e < DPT; ++e) acc[i][e] = 0.f;
  }
  const float c = scale * fa2::kLog2e;
  const int tiles = (n_k + BN - 1) / BN;
  for (int t = 0; t < tiles; ++t) {
    __syncthreads();  // every warp is done with the previous K/V tile
    k_tile.store(k_s, TS, tid);
    v_tile.store(v_s, D, tid);
    __syncthreads();
    if (t + 1 < tiles) {
      k_tile.load(k, (t + 1) * BN, n_k, tid);
      v_tile.load(v, (t + 1) * BN, n_k, tid);
    }
    float s[RPT][CPT];
    fa2::tile_dot<RPT, CPT, D>(q_s, k_s, TS, ty, tx, s);
#pragma unroll
    for (int i = 0; i < RPT; ++i) {
      float mx = fa2::kMasked;
#pragma unroll
      for (int cc = 0; cc < CPT; ++cc) {
        s[i][cc] = t * BN + tx + fa2::kColLanes * cc < n_k ? s[i][cc] * c : fa2::kMasked;
        mx = fmaxf(mx, s[i][cc]);
      }
      const float m_new = fmaxf(m_run[i], fa2::group16_max(mx));
      const float alpha = exp2f(m_run[i] - m_new);
      float sum = 0.f;
#pragma unroll
      for (int cc = 0; cc < CPT; ++cc) {
        const float p = exp2f(s[i][cc] - m_new);
        sum += p;
        p_s[(ty + fa2::kRowGroups * i) * PS + tx + fa2::kColLanes * cc] = p;
      }
      l_run[i] = l_run[i] * alpha + fa2::group16_sum(sum);
      m_run[i] = m_new;
#pragma unroll
      for (int e = 0; e < DPT; ++e) acc[i][e] *= alpha;
    }
    __syncwarp();  // the P rows of this warp are complete
    fa2::tile_accumulate<RPT, D, BN>(p_s, PS, v_s, D, ty, tx, acc);
  }
#pragma unroll
  for (int i = 0; i < RPT; ++i) {
    const int row = m0 + ty + fa2::kRowGroups * i;
    if (row >= n_q) continue;
    fa2::write_cols<D>(o + (size_t(bh) * n_q + row) * D, tx, acc[i], 1.f / l_run[i]);
    if (tx == 0) lse[size_t(bh) * n_q + row] = m_run[i] * fa2::kLn2 + logf(l_run[i]);
  }
}

// ---------------------------------------------------------------------------------------------------------
// Backward preprocess. delta[r] = sum_d dO[r][d] * O[r][d] over the BH * N_CTX_Q rows.

template <int HEAD_DIM>
__global__ void flash_attn2_bwd_preprocess_row_per_cta(
    const __grid_constant__ lab::FlashAttn2PreprocessParams params) {
  const float* __restrict__ o = params.o;
  const float* __restrict__ d_o = params.d_o;
  float* __restrict__ delta = params.delta;
  const int rows = params.rows;
  const int row = blockIdx.x, lane = threadIdx.x;  // block: 32 threads
  if (row >= rows) return;
  float s = 0.f;
  for (int d = lane; d < HEAD_DIM; d += 32)
    s += o[size_t(row) * HEAD_DIM + d] * d_o[size_t(row) * HEAD_DIM + d];
  s = lab_warp_sum(s);
  if (lane == 0) delta[row] = s;
}

template <int HEAD_DIM>
__global__ void flash_attn2_bwd_preprocess_tiled(
    const __grid_constant__ lab::FlashAttn2PreprocessParams params) {
  const float* __restrict__ o = params.o;
  const float* __restrict__ d_o = params.d_o;
  float* __restrict__ delta = params.delta;
  const int rows = params.rows;
  // A row's float4s over at most a warp: HEAD_DIM / 4 lanes of one each, or 32 lanes of HEAD_DIM / 128.
  constexpr int kLanesPerRow = HEAD_DIM / 4 < 32 ? HEAD_DIM / 4 : 32;
  constexpr int kVecsPerLane = HEAD_DIM / 4 / kLanesPerRow, kRowsPerBlock = fa2::kThreads / kLanesPerRow;
  const int lane = threadIdx.x % kLanesPerRow;
  const int row = blockIdx.x * kRowsPerBlock + threadIdx.x / kLanesPerRow;
  float s = 0.f;
  if (row < rows) {
#pragma unroll
    for (int i = 0; i < kVecsPerLane; ++i) {
      const int col = 4 * (lane + kLanesPerRow * i);
      const float4 a = *reinterpret_cast<const float4*>(o + size_t(row) * HEAD_DIM + col);
      const float4 b = *reinterpret_cast<const float4*>(d_o + size_t(row) * HEAD_DIM + col);
      const float part = a.x * b.x + a.y * b.y + a.z * b.z + a.w * b.w;
      s = i == 0 ? part : s + part;
    }
  }
  for (int offset = kLanesPerRow / 2; offset > 0; offset >>= 1)
    s += __shfl_xor_sync(LAB_FULL_MASK, s, offset);
  if (row < rows && lane == 0) delta[row] = s;
}

// ---------------------------------------------------------------------------------------------------------
// dQ backward: dQ[i] = scale sum_j P_ij (dP_ij - D_i) k_j, looping over keys.

template <int HEAD_DIM>
__global__ void flash_attn2_bwd_dq_row_per_cta(const __grid_constant__ lab::FlashAttn2DqParams params) {
  const float* __restrict__ q = params.q;
  const float* __restrict__ k = params.k;
  const float* __restrict__ v = params.v;
  const float* __restrict__ d_o = params.d_o;
  const float* __restrict__ lse = params.lse;
  const float* __restrict__ delta = params.delta;
  float* __restrict__ dq = params.dq;
  const int n_q = params.n_q;
  const int n_k = params.n_k;
  const float scale = params.scale;
  constexpr int D = HEAD_DIM, CPT = fa2::row_cols(D);
  __shared__ __align__(16) float q_s[D];
  __shared__ __align__(16) float do_s[D];
  __shared__ float ds_s[fa2::kThreads];
  const int tid = threadIdx.x, row = blockIdx.x, bh = blockIdx.y;
  const size_t qrow = size_t(bh) * n_q + row;
  const float* k_bh = k + size_t(bh) * n_k * D;
  const float* v_bh = v + size_t(bh) * n_k * D;
#pragma unroll
  for (int cc = 0; cc < CPT; ++cc) {
    const int d = tid + fa2::kThreads * cc;
    if (d < D) q_s[d] = q[qrow * D + d], do_s[d] = d_o[qrow * D + d];
  }
  __syncthreads();
  const float c = scale * fa2::kLog2e, l2 = lse[qrow] * fa2::kLog2e, dr = delta[qrow];
  float acc[CPT];
#pragma unroll
  for (int cc = 0; cc < CPT; ++cc) acc[cc] = 0.f;
  for (int j0 = 0; j0 < n_k; j0 += fa2::kThreads) {
    const int j = j0 + tid;
    float ds = 0.f;
    if (j < n_k) {
      const float p = exp2f(fa2::row_dot<D>(q_s, k_bh + size_t(j) * D) * c - l2);
      ds = p * (fa2::row_dot<D>(do_s, v_bh + size_t(j) * D) - dr);
    }
    ds_s[tid] = ds;
    __syncthreads();
#pragma unroll
    for (int cc = 0; cc < CPT; ++cc) {
      const int d = tid + fa2::kThreads * cc;
      if (d < D) {
        const int count = n_k - j0 < fa2::kThreads ? n_k - j0 : fa2::kThreads;
        for (int jj = 0; jj < count; ++jj) acc[cc] += ds_s[jj] * k_bh[size_t(j0 + jj) * D + d];
      }
    }
    __syncthreads();
  }
#pragma unroll
  for (int cc = 0; cc < CPT; ++cc) {
    const int d = tid + fa2::kThreads * cc;
    if (d < D) dq[qrow * D + d] = acc[cc] * scale;
  }
}

template <int HEAD_DIM, int BLOCK_M>
__global__ void flash_attn2_bwd_dq_tiled(const __grid_constant__ lab::FlashAttn2DqParams params) {
  const float* __restrict__ q = params.q;
  const float* __restrict__ k = params.k;
  const float* __restrict__ v = params.v;
  const float* __restrict__ d_o = params.d_o;
  const float* __restrict__ lse = params.lse;
  const float* __restrict__ delta = params.delta;
  float* __restrict__ dq = params.dq;
  const int n_q = params.n_q;
  const int n_k = params.n_k;
  const float scale = params.scale;
  constexpr int D = HEAD_DIM, BN = fa2::block_n(D), RPT = BLOCK_M / fa2::kRowGroups;
  constexpr int CPT = BN / fa2::kColLanes, DPT = D / 16;
  constexpr int TS = fa2::tile_stride(D), PS = fa2::prob_stride(BN);
  LAB_DYNAMIC_SHARED(float, smem);
  float* q_s = smem;                 // [BLOCK_M][TS]
  float* do_s = q_s + BLOCK_M * TS;  // [BLOCK_M][TS]
  float* k_s = do_s + BLOCK_M * TS;  // [BN][TS]
  float* v_s = k_s + BN * TS;        // [BN][TS]
  float* ds_s = v_s + BN * TS;       // [BLOCK_M][PS]
  const int tid = threadIdx.x, ty = tid / fa2::kColLanes, tx = tid % fa2::kColLanes;
  const int bh = blockIdx.y, m0 = blockIdx.x * BLOCK_M;
  q += size_t(bh) * n_q * D;
  d_o += size_t(bh) * n_q * D;
  k += size_t(bh) * n_k * D;
  v += size_t(bh) * n_k * D;
  {
    fa2::TileStage<BLOCK_M, D> q_tile, do_tile;
    q_tile.load(q, m0, n_q, tid);
    do_tile.load(d_o, m0, n_q, tid);
    q_tile.store(q_s, TS, tid);
    do_tile.store(do_s, TS, tid);
  }
  fa2::TileStage<BN, D> k_tile, v_tile;
  k_tile.load(k, 0, n_k, tid);
  v_tile.load(v, 0, n_k, tid);

  float acc[RPT][DPT], l2[RPT], dr[RPT];
#pragma unroll
  for (int i = 0; i < RPT; ++i) {
    const int row = m0 + ty + fa2::kRowGroups * i;
    l2[i] = row < n_q ? lse[size_t(bh) * n_q + row] * fa2::kLog2e : 0.f;
    dr[i] = row < n_q ? delta[size_t(bh) * n_q + row] : 0.f;
#pragma unroll
    for (int e = 0; e < DPT; ++e) acc[i][e] = 0.f;
  }
  const float c = scale * fa2::kLog2e;
  const int tiles = (n_k + BN - 1) / BN;
  for (int t = 0; t < tiles; ++t) {
    __syncthreads();
    k_tile.store(k_s, TS, tid);
    v_tile.store(v_s, TS, tid);
    __syncthreads();
    if (t + 1 < tiles) {
      k_tile.load(k, (t + 1) * BN, n_k, tid);
      v_tile.load(v, (t + 1) * BN, n_k, tid);
    }
    float s[RPT][CPT], dp[RPT][CPT];
    fa2::tile_dot<RPT, CPT, D>(q_s, k_s, TS, ty, tx, s);
    fa2::tile_dot<RPT, CPT, D>(do_s, v_s, TS, ty, tx, dp);
#pragma unroll
    for (int i = 0; i < RPT; ++i)
#pragma unroll
      for (int cc = 0; cc < CPT; ++cc) {
        const bool valid = t * BN + tx + fa2::kColLanes * cc < n_k;
        const float p = valid ? exp2f(s[i][cc] * c - l2[i]) : 0.f;
        ds_s[(ty + fa2::kRowGroups * i) * PS + tx + fa2::kColLanes * cc] = p * (dp[i][cc] - dr[i]);
      }
    __syncwarp();
    fa2::tile_accumulate<RPT, D, BN>(ds_s, PS, k_s, TS, ty, tx, acc);
  }
#pragma unroll
  for (int i = 0; i < RPT; ++i) {
    const int row = m0 + ty + fa2::kRowGroups * i;
    if (row < n_q) fa2::write_cols<D>(dq + (size_t(bh) * n_q + row) * D, tx, acc[i], scale);
  }
}

// ---------------------------------------------------------------------------------------------------------
// dK/dV backward: dV[j] = sum_i P_ij dO_i, dK[j] = scale sum_i P_ij (dP_ij - D_i) q_i, looping over queries.

template <int HEAD_DIM>
__global__ void flash_attn2_bwd_dkdv_row_per_cta(const __grid_constant__ lab::FlashAttn2DkdvParams params) {
  const float* __restrict__ q = params.q;
  const float* __restrict__ k = params.k;
  const float* __restrict__ v = params.v;
  const float* __restrict__ d_o = params.d_o;
  const float* __restrict__ lse = params.lse;
  const float* __restrict__ delta = params.delta;
  float* __restrict__ dk = params.dk;
  float* __restrict__ dv = params.dv;
  const int n_q = params.n_q;
  const int n_k = params.n_k;
  const float scale = params.scale;
  constexpr int D = HEAD_DIM, CPT = fa2::row_cols(D);
  __shared__ __align__(16) float k_s[D];
  __shared__ __align__(16) float v_s[D];
  __shared__ float p_s[fa2::kThreads];
  __shared__ float ds_s[fa2::kThreads];
  const int tid = threadIdx.x, key = blockIdx.x, bh = blockIdx.y;
  const size_t krow = size_t(bh) * n_k + key;
  const float* q_bh = q + size_t(bh) * n_q * D;
  const float* do_bh = d_o + size_t(bh) * n_q * D;
#pragma unroll
  for (int cc = 0; cc < CPT; ++cc) {
    const int d = tid + fa2::kThreads * cc;
    if (d < D) k_s[d] = k[krow * D + d], v_s[d] = v[krow * D + d];
  }
  __syncthreads();
  const float c = scale * fa2::kLog2e;
  float acc_k[CPT], acc_v[CPT];
#pragma unroll
  for (int cc = 0; cc < CPT; ++cc) acc_k[cc] = 0.f, acc_v[cc] = 0.f;
  for (int i0 = 0; i0 < n_q; i0 += fa2::kThreads) {
    const int i = i0 + tid;
    float p = 0.f, ds = 0.f;
    if (i < n_q) {
      const size_t r = size_t(bh) * n_q + i;
      p = exp2f(fa2::row_dot<D>(k_s, q_bh + size_t(i) * D) * c - lse[r] * fa2::kLog2e);
      ds = p * (fa2::row_dot<D>(v_s, do_bh + size_t(i) * D) - delta[r]);
    }
    p_s[tid] = p;
    ds_s[tid] = ds;
    __syncthreads();
#pragma unroll
    for (int cc = 0; cc < CPT; ++cc) {
      const int d = tid + fa2::kThreads * cc;
      if (d < D) {
        const int count = n_q - i0 < fa2::kThreads ? n_q - i0 : fa2::kThreads;
        for (int ii = 0; ii < count; ++ii) {
          acc_v[cc] += p_s[ii] * do_bh[size_t(i0 + ii) * D + d];
          acc_k[cc] += ds_s[ii] * q_bh[size_t(i0 + ii) * D + d];
        }
      }
    }
    __syncthreads();
  }
#pragma unroll
  for (int cc = 0; cc < CPT; ++cc) {
    const int d = tid + fa2::kThreads * cc;
    if (d < D) dk[krow * D + d] = acc_k[cc] * scale, dv[krow * D + d] = acc_v[cc];
  }
}

template <int HEAD_DIM, int BLOCK_M>
__global__ void flash_attn2_bwd_dkdv_tiled(const __grid_constant__ lab::FlashAttn2DkdvParams params) {
  const float* __restrict__ q = params.q;
  const float* __restrict__ k = params.k;
  const float* __restrict__ v = params.v;
  const float* __restrict__ d_o = params.d_o;
  const float* __restrict__ lse = params.lse;
  const float* __restrict__ delta = params.delta;
  float* __restrict__ dk = params.dk;
  float* __restrict__ dv = params.dv;
  const int n_q = params.n_q;
  const int n_k = params.n_k;
  const float scale = params.scale;
  constexpr int D = HEAD_DIM, BQ = fa2::block_n(D), RPT = BLOCK_M / fa2::kRowGroups;
  constexpr int CPT = BQ / fa2::kColLanes, DPT = D / 16;
  constexpr int TS = fa2::tile_stride(D), PS = fa2::prob_stride(BQ);
  LAB_DYNAMIC_SHARED(float, smem);
  float* k_s = smem;                 // [BLOCK_M][TS]  key rows of this CTA
  float* v_s = k_s + BLOCK_M * TS;   // [BLOCK_M][TS]
  float* q_s = v_s + BLOCK_M * TS;   // [BQ][TS]       query tile
  float* do_s = q_s + BQ * TS;       // [BQ][TS]
  float* l2_s = do_s + BQ * TS;      // [BQ]           L * log2(e) of the tile's queries
  float* dr_s = l2_s + BQ;           // [BQ]           D of the tile's queries
  float* p_s = dr_s + BQ;            // [BLOCK_M][PS]  P^T
  float* ds_s = p_s + BLOCK_M * PS;  // [BLOCK_M][PS]  dS^T
  const int tid = threadIdx.x, ty = tid / fa2::kColLanes, tx = tid % fa2::kColLanes;
  const int bh = blockIdx.y, n0 = blockIdx.x * BLOCK_M;
  q += size_t(bh) * n_q * D;
  d_o += size_t(bh) * n_q * D;
  k += size_t(bh) * n_k * D;
  v += size_t(bh) * n_k * D;
  lse += size_t(bh) * n_q;
  delta += size_t(bh) * n_q;
  {
    fa2::TileStage<BLOCK_M, D> k_tile, v_tile;
    k_tile.load(k, n0, n_k, tid);
    v_tile.load(v, n0, n_k, tid);
    k_tile.store(k_s, TS, tid);
    v_tile.store(v_s, TS, tid);
  }
  fa2::TileStage<BQ, D> q_tile, do_tile;
  q_tile.load(q, 0, n_q, tid);
  do_tile.load(d_o, 0, n_q, tid);
  float l2_next = 0.f, dr_next = 0.f;
  if (tid < BQ && tid < n_q) l2_next = lse[tid] * fa2::kLog2e, dr_next = delta[tid];

  float acc_k[RPT][DPT], acc_v[RPT][DPT];
#pragma unroll
  for (int i = 0; i < RPT; ++i)
#pragma unroll
    for (int e = 0; e < DPT; ++e) acc_k[i][e] = 0.f, acc_v[i][e] = 0.f;
  const float c = scale * fa2::kLog2e;
  const int tiles = (n_q + BQ - 1) / BQ;
  for (int t = 0; t < tiles; ++t) {
    __syncthreads();
    q_tile.store(q_s, TS, tid);
    do_tile.store(do_s, TS, tid);
    if (tid < BQ) l2_s[tid] = l2_next, dr_s[tid] = dr_next;
    __syncthreads();
    if (t + 1 < tiles) {
      const int i1 = (t + 1) * BQ;
      q_tile.load(q, i1, n_q, tid);
      do_tile.load(d_o, i1, n_q, tid);
      l2_next = dr_next = 0.f;
      if (tid < BQ && i1 + tid < n_q) l2_next = lse[i1 + tid] * fa2::kLog2e, dr_next = delta[i1 + tid];
    }
    float s[RPT][CPT], dp[RPT][CPT];
    fa2::tile_dot<RPT, CPT, D>(k_s, q_s, TS, ty, tx, s);    // S^T: rows keys, columns queries
    fa2::tile_dot<RPT, CPT, D>(v_s, do_s, TS, ty, tx, dp);  // dP^T
#pragma unroll
    for (int i = 0; i < RPT; ++i)
#pragma unroll
      for (int cc = 0; cc < CPT; ++cc) {
        const int col = tx + fa2::kColLanes * cc;
        const float p = t * BQ + col < n_q ? exp2f(s[i][cc] * c - l2_s[col]) : 0.f;
        const int at = (ty + fa2::kRowGroups * i) * PS + col;
        p_s[at] = p;
        ds_s[at] = p * (dp[i][cc] - dr_s[col]);
      }
    __syncwarp();
    fa2::tile_accumulate<RPT, D, BQ>(p_s, PS, do_s, TS, ty, tx, acc_v);
    fa2::tile_accumulate<RPT, D, BQ>(ds_s, PS, q_s, TS, ty, tx, acc_k);
  }
#pragma unroll
  for (int i = 0; i < RPT; ++i) {
    const int key = n0 + ty + fa2::kRowGroups * i;
    if (key >= n_k) continue;
    fa2::write_cols<D>(dk + (size_t(bh) * n_k + key) * D, tx, acc_k[i], scale);
    fa2::write_cols<D>(dv + (size_t(bh) * n_k + key) * D, tx, acc_v[i], 1.f);
  }
}

// ---------------------------------------------------------------------------------------------------------
// Attention probabilities of head `bh` for R chosen query rows: P[r, j] = exp(scale q_rows[r] . k_j - L).

template <int HEAD_DIM>
__global__ void attn_probs_row_per_cta(const __grid_constant__ lab::AttnProbsParams params) {
  const float* __restrict__ q = params.q;
  const float* __restrict__ k = params.k;
  const float* __restrict__ lse = params.lse;
  const int* __restrict__ rows = params.rows;
  const int n_rows = params.n_rows;
  const int bh = params.bh;
  const int n_q = params.n_q;
  const int n_k = params.n_k;
  const float scale = params.scale;
  float* __restrict__ probs = params.probs;
  constexpr int D = HEAD_DIM;
  __shared__ __align__(16) float q_s[D];
  const int r = blockIdx.x, tid = threadIdx.x;
  if (r >= n_rows) return;
  const size_t qrow = size_t(bh) * n_q + rows[r];
#pragma unroll
  for (int cc = 0; cc < fa2::row_cols(D); ++cc) {
    const int d = tid + fa2::kThreads * cc;
    if (d < D) q_s[d] = q[qrow * D + d];
  }
  __syncthreads();
  const float c = scale * fa2::kLog2e, l2 = lse[qrow] * fa2::kLog2e;
  const float* k_bh = k + size_t(bh) * n_k * D;
  for (int j = tid; j < n_k; j += fa2::kThreads)
    probs[size_t(r) * n_k + j] = exp2f(fa2::row_dot<D>(q_s, k_bh + size_t(j) * D) * c - l2);
}

template <int HEAD_DIM>
__global__ void attn_probs_tiled(const __grid_constant__ lab::AttnProbsParams params) {
  const float* __restrict__ q = params.q;
  const float* __restrict__ k = params.k;
  const float* __restrict__ lse = params.lse;
  const int* __restrict__ rows = params.rows;
  const int n_rows = params.n_rows;
  const int bh = params.bh;
  const int n_q = params.n_q;
  const int n_k = params.n_k;
  const float scale = params.scale;
  float* __restrict__ probs = params.probs;
  constexpr int D = HEAD_DIM, BN = fa2::probs_block_n(D), BR = 16, RPT = BR / fa2::kRowGroups;
  constexpr int CPT = BN / fa2::kColLanes;
  constexpr int TS = fa2::tile_stride(D);
  __shared__ __align__(16) float q_s[BR * TS];
  __shared__ __align__(16) float k_s[BN * TS];
  const int tid = threadIdx.x, ty = tid / fa2::kColLanes, tx = tid % fa2::kColLanes;
  const int j0 = blockIdx.x * BN, r0 = blockIdx.y * BR;
  const float* q_bh = q + size_t(bh) * n_q * D;
  for (int idx = tid; idx < BR * D / 4; idx += fa2::kThreads) {
    const int r = idx / (D / 4), d = 4 * (idx % (D / 4));
    float4 val = make_float4(0.f, 0.f, 0.f, 0.f);
    if (r0 + r < n_rows) val = *reinterpret_cast<const float4*>(q_bh + size_t(rows[r0 + r]) * D + d);
    *reinterpret_cast<float4*>(q_s + r * TS + d) = val;
  }
  {
    fa2::TileStage<BN, D> k_tile;
    k_tile.load(k + size_t(bh) * n_k * D, j0, n_k, tid);
    k_tile.store(k_s, TS, tid);
  }
  __syncthreads();
  float s[RPT][CPT];
  fa2::tile_dot<RPT, CPT, D>(q_s, k_s, TS, ty, tx, s);
  const float c = scale * fa2::kLog2e;
#pragma unroll
  for (int i = 0; i < RPT; ++i) {
    const int r = r0 + ty + fa2::kRowGroups * i;
    if (r >= n_rows) continue;
    const float l2 = lse[size_t(bh) * n_q + rows[r]] * fa2::kLog2e;
#pragma unroll
    for (int cc = 0; cc < CPT; ++cc) {
      const int j = j0 + tx + fa2::kColLanes * cc;
      if (j < n_k) probs[size_t(r) * n_k + j] = exp2f(s[i][cc] * c - l2);
    }
  }
}
