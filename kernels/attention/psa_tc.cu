// psa_tc: YOLO26's PSA attention core on tensor cores, one launch per forward (layouts as in psa.cu: qkv
// [B, nh*4*KD, H, W] with per head the channels [Q | K | V_lo | V_hi], merged and v_out [B, nh*2*KD, H, W]).
//   psa_attention_fused_tc<KD>      float32 qkv, 3xTF32 mma.sync m16n8k8: the `fused_tc` variant of
//                                   psa_attention, with the `fused` variant's outputs and workspace.
//   psa_attention_half<KD, DT>      fp16 / bf16 qkv (LAB_F16 / LAB_BF16), mma.sync m16n8k16 with float
//                                   accumulation: merged and v_out in the same 16-bit type, L in float.
//   psa_attention_half_nhwc<KD, DT> the same on NHWC views with pitches (wide loads of a token's channels;
//                                   its comment says which orders change).
//   psa_attention_tf32_nhwc<KD, DT> psa_attention_fused_tc's 3xTF32 attention on NHWC float views: the
//                                   float NHWC networks' (tf32 and fp32).
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
#include "attention/psa_tc_parts.cuh"
#include "nn/nhwc_element.cuh"

namespace psa_tc {
constexpr int kWarps = 8;  // each walks its own range of key tiles
constexpr int kThreads = 32 * kWarps;

// Shared memory of the merge: every warp's partial outputs [warp][row][VD + 8] (the pad keeps a warp's float2
// stores conflict-free), maxima and sums [warp][row].
template <int VD>
struct alignas(16) MergeShared {
  static constexpr int kLd = VD + 8;
  float acc[kWarps][kRows][kLd];
  float m[kWarps][kRows];
  float l[kWarps][kRows];
};

// Leaves this warp's state in `sh` (rows g, g + 8; columns 8 nt + 2t, + 1 as one float2).
template <int VD, int NT>
__device__ __forceinline__ void publish(const WarpState<NT>& w, MergeShared<VD>& sh, int warp, int lane) {
  publish_state(w, sh, warp, lane, [&](int row, int col, float v0, float v1) {
    *reinterpret_cast<float2*>(&sh.acc[warp][row][col]) = make_float2(v0, v1);
  });
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
  psa_tc::load_rows<4 * KD, psa_tc::kThreads>(head, n, n0, 0, threadIdx.x, copy);

  const psa_tc::NchwFloatHead<KD> src{head, n};
  float q[KS][4];
  psa_tc::float_query(src, n0, g, t, q);
  const psa_tc::SplitQuery<KS> q_split(q);

  psa_tc::WarpState<NT> w;
  psa_tc::attend_tf32<CH, psa_tc::kWarps, false>(src, q_split, warp, g, t, params.scale, w);

  psa_tc::merge_warps(w, sh, n, n0, [&](int row, int dim, float value, float lse) {
    (dim < KD ? params.o_lo : params.o_hi)[(size_t(bh) * n + row) * KD + dim % KD] = value;
    params.merged[(size_t(bh) * VD + dim) * n + row] = value;
    if (dim == 0) params.lse[size_t(bh) * n + row] = lse;
  });
  psa_tc::store_fused_rows<KD, psa_tc::kThreads>(params, bh, n0, threadIdx.x, copy);
}

// psa_attention_half<KD, DT>: the same attention on 16-bit qkv (DT = LAB_F16 or LAB_BF16), the products
// m16n8k16 with float accumulation, P rounded to DT before P V (as flash_attn2_mma.cu). Writes merged and
// v_out in DT and L in float. Block 256, grid (ceil(N / 16), BH), 16-key tiles (two 8-key score tiles),
// CH = 4 tiles per softmax step (one step per warp up to N = 512); static shared memory: the merge (37 KB at
// KD 32).
template <int KD, int DT>
__global__ void __launch_bounds__(psa_tc::kThreads) psa_attention_half(const lab::PsaHalfParams params) {
  constexpr int VD = 2 * KD, NT = VD / 8, CH = 4, QB = psa_tc::kRows;
  static_assert(KD == 16 || KD == 32, "the 16-bit PSA forward is instantiated for KEY_DIM 16 and 32");
  const uint16_t* __restrict__ qkv = params.qkv;
  const int n = params.n, bh = blockIdx.y, n0 = blockIdx.x * QB;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
  const uint16_t* head = qkv + size_t(bh) * 4 * KD * n;
  __shared__ psa_tc::MergeShared<VD> sh;

  // This CTA's rows of V, for v_out (load_rows).
  constexpr int kCopies = 2 * KD * QB / psa_tc::kThreads;
  uint16_t copy[kCopies];
  psa_tc::load_rows<2 * KD, psa_tc::kThreads>(head, n, n0, 2 * KD, threadIdx.x, copy);

  psa_tc::WarpState<NT> w;
  psa_tc::attend_half_nchw<DT, false, CH, psa_tc::kWarps>(psa_tc::NchwHalfHead<KD>{head, n}, n0, warp, g, t,
                                                          params.scale, w);

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
  constexpr int VD = 2 * KD, NT = VD / 8, CH = 4, QB = psa_tc::kRows;
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

  psa_tc::WarpState<NT> w;
  psa_tc::attend_half_nhwc<DT, false, CH, psa_tc::kWarps, KD>(token, n, n0, warp, g, t, params.scale, w);

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

// psa_attention_tf32_nhwc<KD, DT> (the float NHWC networks' attention, PsaTf32NhwcOp):
// psa_attention_fused_tc's 3xTF32 products and steps (float32 accuracy) on NHWC float views with pitches
// (PsaTf32NhwcParams), and psa_attention_half_nhwc's outputs: merged (stored as DT stores a float,
// nn/nhwc_element.cuh: rounded to tf32 values for LAB_F32, the tf32 network's; unrounded for LAB_F32X3, the
// fp32 one's) and v_out into their channel slices, L. Operands come element by element through NhwcFloatHead
// (psa_tc_parts.cuh); merged and v_out are written 4 channels (16 bytes) per thread, a row's channels by
// consecutive threads. Block 256, grid (ceil(N / 16), BH); static shared memory: the merge.
template <int KD, int DT>
__global__ void __launch_bounds__(psa_tc::kThreads)
    psa_attention_tf32_nhwc(const lab::PsaTf32NhwcParams params) {
  constexpr int VD = 2 * KD, KS = KD / 8, NT = VD / 8, CH = 4, QB = psa_tc::kRows;
  static_assert(KD == 16 || KD == 32, "the tensor-core PSA forward is instantiated for KEY_DIM 16 and 32");
  const int n = params.n, bh = blockIdx.y, n0 = blockIdx.x * QB, b = bh / params.heads, h = bh % params.heads;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
  const psa_tc::NhwcFloatHead<KD> src{params.qkv + size_t(b) * n * params.qkv_pitch + h * 4 * KD,
                                      params.qkv_pitch, n};
  __shared__ psa_tc::MergeShared<VD> sh;
  lab_grid_dependency_wait();  // as psa_attention_half_nhwc
  lab_launch_dependents();

  // This CTA's rows of V, for v_out: piece i is row i / (VD / 4), channels 4 (i % (VD / 4)) .. + 3.
  constexpr int kPieces = QB * VD / 4, kCopies = (kPieces + psa_tc::kThreads - 1) / psa_tc::kThreads;
  float4 copy[kCopies];
#pragma unroll
  for (int it = 0; it < kCopies; ++it) {
    const int i = threadIdx.x + it * psa_tc::kThreads, row = n0 + i / (VD / 4);
    copy[it] = i < kPieces && row < n ? *reinterpret_cast<const float4*>(src.first + size_t(row) * src.pitch +
                                                                         2 * KD + 4 * (i % (VD / 4)))
                                      : make_float4(0.f, 0.f, 0.f, 0.f);
  }

  float q[KS][4];
  psa_tc::float_query(src, n0, g, t, q);
  const psa_tc::SplitQuery<KS> q_split(q);
  psa_tc::WarpState<NT> w;
  psa_tc::attend_tf32<CH, psa_tc::kWarps, false>(src, q_split, warp, g, t, params.scale, w);

  psa_tc::publish(w, sh, warp, lane);
  __syncthreads();
#pragma unroll
  for (int it = 0; it < kCopies; ++it) {
    const int i = threadIdx.x + it * psa_tc::kThreads, r = i / (VD / 4), c0 = 4 * (i % (VD / 4)),
              row = n0 + r;
    if (i >= kPieces || row >= n) continue;
    const size_t pixel = size_t(b) * n + row;
    float value[4], lse;
#pragma unroll
    for (int k = 0; k < 4; ++k) value[k] = psa_tc::merged_value(sh, r, c0 + k, lse);
    *reinterpret_cast<float4*>(params.merged + pixel * params.merged_pitch + h * VD + c0) =
        make_float4(nn::nhwc_float_store_value<DT>(value[0]), nn::nhwc_float_store_value<DT>(value[1]),
                    nn::nhwc_float_store_value<DT>(value[2]), nn::nhwc_float_store_value<DT>(value[3]));
    *reinterpret_cast<float4*>(params.v_out + pixel * params.v_pitch + h * VD + c0) = copy[it];
    if (c0 == 0) params.lse[size_t(bh) * n + row] = lse;
  }
}

// psa_attention_half_nhwc_staged<KD, DT> (variant `mma_staged` of psa_attention_half: NHWC views only, N <=
// 1024): psa_attention_half_nhwc with the head's K | V rows (6 KD contiguous bytes a token) and the CTA's Q
// rows staged in shared memory by 16-byte cp.async pieces, then read as mma fragments by ldmatrix at fixed
// 32-bit offsets (natural operand orders, no channel permutation), instead of 27 wide loads a thread and
// their 64-bit address arithmetic (708 SASS instructions before psa_attention_half_nhwc's first HMMA,
// docs/kernels/attention.md). One cp.async wait and one barrier before the walk; the walk and the softmax
// are psa_attention_half_nhwc's, the merge the row merge of psa_tc_w16.cu (no statistics recomputed per
// value; 8-byte stores). Dynamic shared memory lab::psa_staged_shared_bytes(KD, N): the rows
// [16 ceil(N / 16)][3 KD + 8] and [16][KD + 8] (the 16-byte pad puts a ldmatrix's eight rows in distinct
// banks), reused by the merge after a second barrier; v_out is copied from the staged V rows before it.
// Block 256, grid (ceil(N / 16), BH).
template <int KD, int DT>
__global__ void __launch_bounds__(psa_tc::kThreads)
    psa_attention_half_nhwc_staged(const lab::PsaHalfNhwcParams params) {
  constexpr int VD = 2 * KD, KS = KD / 16, NT = VD / 8, CH = 4, QB = psa_tc::kRows;
  constexpr int LD = lab::psa_staged_kv_row(KD), LDQ = lab::psa_staged_q_row(KD), PIECES = 3 * KD / 8;
  static_assert(KD == 16 || KD == 32, "the 16-bit PSA forward is instantiated for KEY_DIM 16 and 32");
  using Merge = psa_tc::RowMergeShared<VD, psa_tc::kWarps>;
  static_assert(sizeof(Merge) == lab::psa_row_merge_bytes(psa_tc::kWarps, KD), "the launch's shared bytes");
  const int n = params.n, bh = blockIdx.y, n0 = blockIdx.x * QB, b = bh / params.heads, h = bh % params.heads;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, t = lane % 4, tiles = (n + 15) / 16;
  auto token = [&](int row) { return params.qkv + (size_t(b) * n + row) * params.qkv_pitch + h * 4 * KD; };
  LAB_DYNAMIC_SHARED(uint16_t, kv);  // [16 tiles][LD]: K channels [0, KD), V [KD, 3 KD)
  uint16_t* qs = kv + tiles * 16 * LD;
  lab_grid_dependency_wait();  // as psa_attention_half_nhwc
  lab_launch_dependents();

  for (int i = threadIdx.x; i < tiles * 16 * PIECES; i += psa_tc::kThreads) {
    const int row = i / PIECES, piece = i % PIECES;  // keys past N: zeros
    lab_cp_async_16(kv + row * LD + 8 * piece, token(row) + KD + 8 * piece, row < n);
  }
  if (threadIdx.x < QB * KD / 8) {
    const int r = threadIdx.x / (KD / 8), piece = threadIdx.x % (KD / 8);
    lab_cp_async_16(qs + r * LDQ + 8 * piece, token(n0 + r) + 8 * piece, n0 + r < n);
  }
  lab_cp_async_commit();
  lab_cp_async_wait<0>();
  __syncthreads();

  uint32_t q[KS][4];
#pragma unroll
  for (int ks = 0; ks < KS; ++ks) lab_load_a<LDQ>(q[ks], qs, 0, 16 * ks, lane);
  psa_tc::WarpState<NT> w;
  // Tile j's K fragments (score tiles 2j, 2j + 1: keys 0-7 and 8-15) and V fragments, two n8 tiles a load.
  auto load = [&](int tile0, uint32_t(&kf)[2 * CH][KS][2], uint32_t(&vf)[CH][NT][2]) {
#pragma unroll
    for (int j = 0; j < CH; ++j) {
      if (tile0 + j >= tiles) continue;  // warp-uniform; past the warp's range, so never used
      const int key0 = (tile0 + j) * 16;
#pragma unroll
      for (int ks = 0; ks < KS; ++ks) {
        uint32_t f[4];
        lab_load_b_rows_n<LD>(f, kv, key0, 16 * ks, lane);
        kf[2 * j][ks][0] = f[0], kf[2 * j][ks][1] = f[1], kf[2 * j + 1][ks][0] = f[2],
               kf[2 * j + 1][ks][1] = f[3];
      }
#pragma unroll
      for (int nt = 0; nt < NT; nt += 2) {
        uint32_t f[4];
        lab_load_b_rows_k<LD>(f, kv, KD + 8 * nt, key0, lane);
        vf[j][nt][0] = f[0], vf[j][nt][1] = f[1], vf[j][nt + 1][0] = f[2], vf[j][nt + 1][1] = f[3];
      }
    }
  };
  psa_tc::attend_half<DT, true, CH, false, psa_tc::kWarps>(q, n, warp, t, params.scale, load, w);

  // v_out: 16-byte pieces of this CTA's staged V rows, then the merge takes the memory over.
  if (threadIdx.x < QB * VD / 8) {
    const int r = threadIdx.x / (VD / 8), c0 = 8 * (threadIdx.x % (VD / 8)), row = n0 + r;
    if (row < n)
      *reinterpret_cast<uint4*>(params.v_out + (size_t(b) * n + row) * params.v_pitch + h * VD + c0) =
          *reinterpret_cast<const uint4*>(kv + row * LD + KD + c0);
  }
  __syncthreads();
  Merge& sh = *reinterpret_cast<Merge*>(kv);
  psa_tc::publish_channels(w, sh, warp, lane, [](int col) { return col; });
  __syncthreads();
  psa_tc::merge_rows(sh, n, n0, [&](int row, int c0, const float(&value)[VD / 16], float lse, bool first) {
    psa_tc::store_packed<DT>(params.merged + (size_t(b) * n + row) * params.merged_pitch + h * VD + c0,
                             value);
    if (first) params.lse[size_t(bh) * n + row] = lse;
  });
}
