// psa_tc_w16: psa_tc.cu's PSA attention cores with a CTA's keys split over 16 warps instead of 8 (layouts,
// operand orders and the per-warp steps as there):
//   psa_attention_half_w16<KD, DT>       variant `mma_w16` of psa_attention_half, NCHW planes (PsaHalfParams)
//   psa_attention_half_nhwc_w16<KD, DT>  the same on NHWC views with pitches (PsaHalfNhwcParams; waits for
//                                        its predecessor with Programmatic Dependent Launch)
//   psa_attention_fused_tc_w16<KD>       variant `fused_tc_w16` of psa_attention: float32 qkv, 3xTF32
// KD 16 or 32, VD = 2 KD, DT = LAB_F16 or LAB_BF16.
//
// Why: the 8-warp kernels run 50 CTAs at yolo26n's size (N 400, 2 heads) and are latency chains: each warp
// walks 3-4 16-key tiles (6-7 8-key tiles in float32), then the CTA's merge recomputes a row's statistics for
// every output value. Here one CTA of 16 warps (512 threads, 128 registers each) still owns 16 query rows,
// each warp takes one or two 16-key tiles (CH = 2: one step up to N = 512, its K and V loads issued before
// its first product), so a warp's dependent chain is about half as long; the merge costs one barrier and no
// recomputation (and the 16-bit softmax's exponentials are single ex2.approx.ftz, psa_tc::softmax_exp2):
//   - every warp leaves its partial state in shared memory with the outputs in value-channel order
//     ([warp][row][VD + 4] floats, dynamic: lab::psa_w16_shared_bytes);
//   - after one __syncthreads, warps 0-7 merge: 16 threads per row, thread j reads warp j's (max, sum), the
//     row's max, sum and every warp's weight exp2(m_j - m) / l come from half-warp shuffles, and the thread
//     sums PW = VD / 16 contiguous channels over the 16 warps (one vector shared load per warp), written by
//     one PW-channel store; warps 8-15 meanwhile copy the CTA's rows of V to v_out (and in float32 of every
//     section to `packed`), loaded then: registers are short during the key walk.
#include "common/lab.cuh"
#include "common/lab_mma.cuh"
#include "common/lab_grid_dependency.cuh"
#include "attention/psa_params.cuh"
#include "attention/psa_tc_parts.cuh"

namespace psa_w16 {
constexpr int kWarps = lab::kPsaW16Warps;
constexpr int kThreads = 32 * kWarps;
constexpr int kMergeThreads = psa_tc::kRows * psa_tc::kMergeGroup;  // warps 0-7
constexpr int kCh = 2;                                              // 16-key tiles per softmax step
template <int VD>
using Shared = psa_tc::RowMergeShared<VD, kWarps>;  // the row merge of the 16 warps

}  // namespace psa_w16

// psa_attention_half_w16<KD, DT>: NCHW planes, the loads in the step as psa_attention_half (HOIST false:
// hoisted, its scalar loads spill at 128 registers). Block 512, grid (ceil(N / 16), BH), dynamic shared
// memory lab::psa_w16_shared_bytes(KD). v_out: warps 8-15 copy the CTA's rows of the V planes while warps 0-7
// merge (4 elements each at KD 32, a channel's 16 rows by 16 consecutive threads).
template <int KD, int DT>
__global__ void __launch_bounds__(psa_w16::kThreads) psa_attention_half_w16(const lab::PsaHalfParams params) {
  constexpr int VD = 2 * KD, NT = VD / 8, QB = psa_tc::kRows, CH = psa_w16::kCh;
  static_assert(KD == 16 || KD == 32, "the 16-bit PSA forward is instantiated for KEY_DIM 16 and 32");
  static_assert(sizeof(psa_w16::Shared<VD>) == lab::psa_w16_shared_bytes(KD), "the launch's shared bytes");
  const uint16_t* __restrict__ qkv = params.qkv;
  const int n = params.n, bh = blockIdx.y, n0 = blockIdx.x * QB;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
  const uint16_t* head = qkv + size_t(bh) * 4 * KD * n;
  LAB_DYNAMIC_SHARED(psa_w16::Shared<VD>, sh);

  psa_tc::WarpState<NT> w;
  psa_tc::attend_half_nchw<DT, true, CH, psa_w16::kWarps>(psa_tc::NchwHalfHead<KD>{head, n}, n0, warp, g, t,
                                                          params.scale, w);

  psa_tc::publish_channels(w, *sh, warp, lane, [](int col) { return col; });
  __syncthreads();
  constexpr int kCopyThreads = psa_w16::kThreads - psa_w16::kMergeThreads, kCopies = VD * QB / kCopyThreads;
  const int copier = int(threadIdx.x) - psa_w16::kMergeThreads;  // < 0 on the merging warps
  if (copier < 0) {
    psa_tc::merge_rows(*sh, n, n0, [&](int row, int c0, const float(&value)[VD / 16], float lse, bool first) {
#pragma unroll
      for (int k = 0; k < VD / 16; ++k)
        params.merged[(size_t(bh) * VD + c0 + k) * n + row] =
            uint16_t(lab_pack2<DT>(value[k], 0.f) & 0xffffu);
      if (first) params.lse[size_t(bh) * n + row] = lse;
    });
  } else {
    uint16_t copy[kCopies];
    psa_tc::load_rows<2 * KD, kCopyThreads>(head, n, n0, 2 * KD, copier, copy);
#pragma unroll
    for (int it = 0; it < kCopies; ++it) {
      const int i = copier + it * kCopyThreads, row = n0 + i % QB;
      if (row < n) params.v_out[(size_t(bh) * VD + i / QB) * n + row] = copy[it];
    }
  }
}

// psa_attention_half_nhwc_w16<KD, DT>: NHWC views with pitches (psa_attention_half_nhwc's loads and channel
// orders: output column 8 nt + c is value channel c NT + nt, published in channel order). Block 512, grid
// (ceil(N / 16), BH), dynamic shared memory lab::psa_w16_shared_bytes(KD). v_out: warps 8-15 copy 16-byte
// row pieces (8 channels) while warps 0-7 merge. Pitches multiples of 8, pointers 16-byte aligned.
template <int KD, int DT>
__global__ void __launch_bounds__(psa_w16::kThreads)
    psa_attention_half_nhwc_w16(const lab::PsaHalfNhwcParams params) {
  constexpr int VD = 2 * KD, NT = VD / 8, QB = psa_tc::kRows, CH = psa_w16::kCh;
  static_assert(KD == 16 || KD == 32, "the 16-bit PSA forward is instantiated for KEY_DIM 16 and 32");
  static_assert(sizeof(psa_w16::Shared<VD>) == lab::psa_w16_shared_bytes(KD), "the launch's shared bytes");
  const int n = params.n, bh = blockIdx.y, n0 = blockIdx.x * QB, b = bh / params.heads, h = bh % params.heads;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
  // Token `row` of this head: channels [Q | K | V] from its first.
  auto token = [&](int row) { return params.qkv + (size_t(b) * n + row) * params.qkv_pitch + h * 4 * KD; };
  LAB_DYNAMIC_SHARED(psa_w16::Shared<VD>, sh);
  // Programmatic Dependent Launch, as psa_attention_half_nhwc: loads and stores after the wait.
  lab_grid_dependency_wait();
  lab_launch_dependents();

  psa_tc::WarpState<NT> w;
  psa_tc::attend_half_nhwc<DT, true, CH, psa_w16::kWarps, KD>(token, n, n0, warp, g, t, params.scale, w);

  psa_tc::publish_channels(w, *sh, warp, lane, [](int col) { return col % 8 * NT + col / 8; });
  __syncthreads();
  // Piece p of v_out: row p / (VD / 8), channels 8 (p % (VD / 8)) .. + 7; one per copying thread.
  constexpr int kPieces = QB * VD / 8;
  static_assert(kPieces <= psa_w16::kThreads - psa_w16::kMergeThreads, "one v_out piece per copying thread");
  const int piece = int(threadIdx.x) - psa_w16::kMergeThreads, copy_row = n0 + piece / (VD / 8);
  if (piece < 0) {
    psa_tc::merge_rows(*sh, n, n0, [&](int row, int c0, const float(&value)[VD / 16], float lse, bool first) {
      const size_t pixel = size_t(b) * n + row;
      psa_tc::store_packed<DT>(params.merged + pixel * params.merged_pitch + h * VD + c0, value);
      if (first) params.lse[size_t(bh) * n + row] = lse;
    });
  } else if (piece < kPieces && copy_row < n) {
    const int c0 = 8 * (piece % (VD / 8));
    *reinterpret_cast<uint4*>(params.v_out + (size_t(b) * n + copy_row) * params.v_pitch + h * VD + c0) =
        *reinterpret_cast<const uint4*>(token(copy_row) + 2 * KD + c0);
  }
}

// psa_attention_fused_tc_w16<KD> (variant `fused_tc_w16` of psa_attention): psa_attention_fused_tc on 16
// warps: float32 qkv, 3xTF32 m16n8k8, the same outputs and workspace (merged, v_out, and this CTA's rows of
// packed, o_lo, o_hi, L). Each warp takes three or four 8-key tiles at N 400, one per step: at 128 registers
// a thread, two tiles per step spill (76 bytes with Q split once, more with Q split at each use); one tile
// with Q split at each use takes 127, no spills. Block 512, grid (ceil(N / 16), BH), dynamic shared memory
// lab::psa_w16_shared_bytes(KD); after the merge's barrier warps 8-15 copy the CTA's rows of every section
// to packed and of V to v_out while warps 0-7 merge.
template <int KD>
__global__ void __launch_bounds__(psa_w16::kThreads)
    psa_attention_fused_tc_w16(const lab::PsaFusedParams params) {
  constexpr int VD = 2 * KD, KS = KD / 8, NT = VD / 8, QB = psa_tc::kRows, PW = VD / psa_w16::kWarps;
  static_assert(KD == 16 || KD == 32, "the tensor-core PSA forward is instantiated for KEY_DIM 16 and 32");
  static_assert(sizeof(psa_w16::Shared<VD>) == lab::psa_w16_shared_bytes(KD), "the launch's shared bytes");
  const float* __restrict__ qkv = params.qkv;
  const int n = params.n, bh = blockIdx.y, n0 = blockIdx.x * QB;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
  const float* head = qkv + size_t(bh) * 4 * KD * n;  // channels [Q | K | V_lo | V_hi], each KD x N
  LAB_DYNAMIC_SHARED(psa_w16::Shared<VD>, sh);

  const psa_tc::NchwFloatHead<KD> src{head, n};
  psa_tc::FloatQuery<KS> q;
  psa_tc::float_query(src, n0, g, t, q.q);
  psa_tc::WarpState<NT> w;
  psa_tc::attend_tf32<1, psa_w16::kWarps, true>(src, q, warp, g, t, params.scale, w);

  psa_tc::publish_channels(w, *sh, warp, lane, [](int col) { return col; });
  __syncthreads();
  constexpr int kCopyThreads = psa_w16::kThreads - psa_w16::kMergeThreads,
                kCopies = 4 * KD * QB / kCopyThreads;
  const int copier = int(threadIdx.x) - psa_w16::kMergeThreads;  // < 0 on the merging warps
  if (copier < 0) {
    psa_tc::merge_rows(*sh, n, n0, [&](int row, int c0, const float(&value)[PW], float lse, bool first) {
      float* o = (c0 < KD ? params.o_lo : params.o_hi) + (size_t(bh) * n + row) * KD + c0 % KD;
      if constexpr (PW == 4)
        *reinterpret_cast<float4*>(o) = make_float4(value[0], value[1], value[2], value[3]);
      else
        *reinterpret_cast<float2*>(o) = make_float2(value[0], value[1]);
#pragma unroll
      for (int k = 0; k < PW; ++k) params.merged[(size_t(bh) * VD + c0 + k) * n + row] = value[k];
      if (first) params.lse[size_t(bh) * n + row] = lse;
    });
  } else {
    float copy[kCopies];
    psa_tc::load_rows<4 * KD, kCopyThreads>(head, n, n0, 0, copier, copy);
    psa_tc::store_fused_rows<KD, kCopyThreads>(params, bh, n0, copier, copy);
  }
}
