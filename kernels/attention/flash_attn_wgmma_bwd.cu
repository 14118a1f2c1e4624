// flash_attn_wgmma_bwd: the Flash Attention backward in fp16 / bf16 for Hopper (sm_90a): dK and dV held in
// registers across the loop over query tiles, dQ added into a float32 accumulator with vector reductions.
// Non-causal. Same layouts, scale, L and D = rowsum(dO * O) (flash_attn2_mma.cu's preprocess) as
// flash_attn2_mma.cu, whose mma.sync kernels stay the portable variants.
//
// A CTA is three warpgroups (384 threads) and owns 128 keys of one batch * head; grid (ceil(N_CTX_K / 128),
// BH). It walks the queries in tiles of BM (128 at HEAD_DIM 64, 64 at HEAD_DIM 128).
//   Warpgroup 0, the producer, gives registers back (setmaxnreg.dec). Its thread 0 issues every copy: K and
//     V of the CTA's keys once, then Q and dO of each query tile into a ring of STAGES buffers; its warp 1
//     copies L (times log2 e) and D of the tile into the same stage with ordinary loads and stores and
//     arrives on the stage's "full" mbarrier too. Before reusing a stage both wait for its "empty" mbarrier.
//   Warpgroups 1 and 2, the consumers (setmaxnreg.inc), own 64 keys each. Per query tile:
//     S^T = K Q^T and dP^T = V dO^T, HEAD_DIM / 16 SS wgmma m64nBMk16 each (K, V, Q, dO K-major);
//     P^T = 2^(S^T scale log2 e - L log2 e) and dS^T = P^T (dP^T - D) on the accumulator registers;
//     dV += P^T dO and dK += dS^T Q, BM / 16 RS wgmma m64nHEAD_DIMk16 each: P^T and dS^T, rounded to the
//     element type, are register for register the A operand (the forward's trick for P), dO and Q are read
//     MN-major (their rows are queries, the product's K dimension). Then every consumer thread arrives on the
//     stage's empty mbarrier.
//   FUSED_DQ: each consumer also stores its dS^T rows, rounded, into a swizzled [BM / 64][128 keys][64] tile
//     (two buffers, by tile parity), fences them for the async proxy and meets the other consumer at named
//     barrier 1 (256 threads); then it computes a 64 x 64 block of dQ = dS K over the CTA's
//     128 keys (8 SS wgmma m64n64k16, dS read M-major from the dS^T tile, K MN-major): at HEAD_DIM 64
//     consumer c takes queries 64 c .. 64 c + 63 of the 128, at HEAD_DIM 128 columns 64 c .. 64 c + 63 of the
//     64 queries. The block is added into dq_acc with red.global.add.v2.f32 (lab_red_add_f32x2). A buffer
//     is written again two tiles later, after both consumers have passed the next tile's barrier, so after
//     their products reading it completed.
// Shared memory, in 1024-byte aligned regions: K and V as [HEAD_DIM / 64][128 keys][64], Q and dO as
//   [STAGES][HEAD_DIM / 64][BM][64] (flash_attn_wgmma_tiles.cuh), the dS^T buffers, then L and D as
//   [STAGES][BM] floats and the mbarriers. Rows past N_CTX_Q / N_CTX_K load as zeros (the maps' bounds); P of
//   a query or key past the end is set to 0, so those rows add nothing to dK, dV or dQ, and their outputs are
//   not stored.
// Precision: products of 16-bit values summed in float; P^T and dS^T rounded to the element type before their
//   products, dK and dV once at the end (dK times scale); dQ is summed in float (its order across CTAs varies
//   from run to run on the GPU) and scaled and rounded by the conversion kernel.
#include "common/lab.cuh"
#include "common/lab_mma.cuh"
#include "common/lab_tensor_map.cuh"
#include "common/lab_mbarrier.cuh"
#include "common/lab_named_barrier.cuh"
#include "common/lab_swizzle.cuh"
#include "common/lab_tma.cuh"
#include "common/lab_wgmma.cuh"
#include "attention/flash_attn_wgmma_bwd_params.cuh"
#include "attention/flash_attn_wgmma_tiles.cuh"

namespace fa_wgmma_bwd {

constexpr int kBlockN = 128;  // keys per CTA: 64 per consumer warpgroup

// Byte offsets of the shared-memory regions of one configuration.
template <int HEAD_DIM, int BM, int STAGES, bool FUSED_DQ>
struct Smem {
  static constexpr unsigned kv_elems = kBlockN * HEAD_DIM;           // K or V
  static constexpr unsigned tile_elems = BM * HEAD_DIM;              // one Q or dO stage
  static constexpr unsigned ds_elems = FUSED_DQ ? kBlockN * BM : 0;  // one dS^T buffer
  static constexpr unsigned v = kv_elems * 2;
  static constexpr unsigned q = v + kv_elems * 2;
  static constexpr unsigned d_o = q + STAGES * tile_elems * 2;
  static constexpr unsigned ds = d_o + STAGES * tile_elems * 2;
  static constexpr unsigned lse = ds + 2 * ds_elems * 2;
  static constexpr unsigned delta = lse + STAGES * BM * 4;
  static constexpr unsigned barriers = delta + STAGES * BM * 4;
  static constexpr unsigned bytes = barriers + (1 + 2 * STAGES) * 8;
};

}  // namespace fa_wgmma_bwd

// dK, dV (and with FUSED_DQ the dQ accumulator): grid (ceil(N_CTX_K / 128), BH), block 384, dynamic shared
// memory Smem<...>::bytes + 1024 (the regions are aligned up to 1024 bytes inside it).
template <int DT, int HEAD_DIM, int BM, int STAGES, bool FUSED_DQ>
__global__ void __launch_bounds__(384, 1)
    flash_attn_wgmma_bwd(const __grid_constant__ lab::FlashAttnWgmmaBwdParams p) {
  using namespace fa_wgmma;
  using namespace fa_wgmma_bwd;
  using S = Smem<HEAD_DIM, BM, STAGES, FUSED_DQ>;
  static_assert((HEAD_DIM == 64 && BM == 128) || (HEAD_DIM == 128 && BM == 64),
                "each consumer's dQ block is 64 x 64: 128 queries at HEAD_DIM 64, 64 at HEAD_DIM 128");
  constexpr int kBlocks = HEAD_DIM / kColumns;
  LAB_DYNAMIC_SHARED(unsigned char, raw);
  unsigned char* base = lab_smem_align_1024(raw);
  uint16_t* sk = reinterpret_cast<uint16_t*>(base);
  uint16_t* sv = reinterpret_cast<uint16_t*>(base + S::v);
  uint16_t* sq = reinterpret_cast<uint16_t*>(base + S::q);
  uint16_t* sdo = reinterpret_cast<uint16_t*>(base + S::d_o);
  uint16_t* sds = reinterpret_cast<uint16_t*>(base + S::ds);
  float* sl = reinterpret_cast<float*>(base + S::lse);
  float* sd = reinterpret_cast<float*>(base + S::delta);
  uint64_t* kv_full = reinterpret_cast<uint64_t*>(base + S::barriers);
  uint64_t* full = kv_full + 1;
  uint64_t* empty = full + STAGES;

  const int tid = threadIdx.x, warpgroup = tid / 128;
  const int bh = blockIdx.y, n0 = blockIdx.x * kBlockN;
  const int tiles = (p.n_q + BM - 1) / BM;
  if (tid == 0) {
    lab_mbarrier_init(kv_full, 1);
    for (int s = 0; s < STAGES; ++s) {
      lab_mbarrier_init(&full[s], 1 + 32);  // the copies' thread and the L / D warp
      lab_mbarrier_init(&empty[s], 256);    // every consumer thread
    }
    lab_fence_mbarrier_init();
  }
  __syncthreads();

  if (warpgroup == 0) {  // the producer
    lab_setmaxnreg_dec<24>();
    if (tid == 0) {
      lab_mbarrier_arrive_expect_tx(kv_full, 2 * S::kv_elems * 2);
      for (int b = 0; b < kBlocks; ++b) {
        lab_tma_load_3d(sk + b * kBlockN * kColumns, &p.k_map, kv_full, b * kColumns, n0, bh);
        lab_tma_load_3d(sv + b * kBlockN * kColumns, &p.v_map, kv_full, b * kColumns, n0, bh);
      }
      for (int j = 0; j < tiles; ++j) {
        const int s = j % STAGES;
        if (j >= STAGES) lab_mbarrier_wait_parity(&empty[s], (j / STAGES - 1) & 1);
        lab_mbarrier_arrive_expect_tx(&full[s], 2 * S::tile_elems * 2);
        for (int b = 0; b < kBlocks; ++b) {
          const int offset = s * S::tile_elems + b * BM * kColumns;
          lab_tma_load_3d(sq + offset, &p.q_map, &full[s], b * kColumns, j * BM, bh);
          lab_tma_load_3d(sdo + offset, &p.do_map, &full[s], b * kColumns, j * BM, bh);
        }
      }
    } else if (tid / 32 == 1) {  // L in the log2 domain and D; rows past n_q read 0 (their P is masked)
      const float* lh = p.lse + size_t(bh) * p.n_q;
      const float* dh = p.delta + size_t(bh) * p.n_q;
      for (int j = 0; j < tiles; ++j) {
        const int s = j % STAGES;
        if (j >= STAGES) lab_mbarrier_wait_parity(&empty[s], (j / STAGES - 1) & 1);
        for (int r = tid % 32; r < BM; r += 32) {
          const int row = j * BM + r;
          sl[s * BM + r] = row < p.n_q ? lh[row] * kLog2e : 0.f;
          sd[s * BM + r] = row < p.n_q ? dh[row] : 0.f;
        }
        lab_mbarrier_arrive(&full[s]);
      }
    }
    return;
  }

  // A consumer: keys 64 c .. 64 c + 63 of the block. Accumulator element i of this thread is row
  // 16 w + g + 8 ((i / 2) % 2), column 8 (i / 4) + 2 q + i % 2 (common/lab_wgmma.cuh): rows are keys
  // (S^T, dP^T, dK, dV) or queries (dQ), columns queries or head dimensions.
  lab_setmaxnreg_inc<240>();
  const int c = warpgroup - 1, t = tid % 128, w = t / 32, g = t % 32 / 4, q = t % 4;
  const uint16_t* k_rows = sk + c * 64 * kColumns;
  const uint16_t* v_rows = sv + c * 64 * kColumns;
  const int key0 = n0 + 64 * c + 16 * w + g;
  const bool key_valid[2] = {key0 < p.n_k, key0 + 8 < p.n_k};
  const bool keys_tail = n0 + kBlockN > p.n_k;
  const float scale_log2 = p.scale * kLog2e;
  float dk[HEAD_DIM / 2], dv[HEAD_DIM / 2];
#pragma unroll
  for (int i = 0; i < HEAD_DIM / 2; ++i) dk[i] = dv[i] = 0.f;

  lab_mbarrier_wait_parity(kv_full, 0);
  for (int j = 0; j * BM < p.n_q; ++j) {  // the bound from parameter space: one register less
    const int s = j % STAGES;
    const uint16_t* qt = sq + s * S::tile_elems;
    const uint16_t* dot = sdo + s * S::tile_elems;
    const float* lt = sl + s * BM;
    const float* dt = sd + s * BM;

    float st[BM / 2], dpt[BM / 2];
    lab_mbarrier_wait_parity(&full[s], (j / STAGES) & 1);
    lab_wgmma_fence();
#pragma unroll
    for (int kk = 0; kk < HEAD_DIM / 16; ++kk)
      lab_wgmma_ss<DT, BM, 0, 0>(st, k_major_desc(k_rows, kBlockN, kk), k_major_desc(qt, BM, kk), kk > 0);
    lab_wgmma_commit_group();
#pragma unroll
    for (int kk = 0; kk < HEAD_DIM / 16; ++kk)
      lab_wgmma_ss<DT, BM, 0, 0>(dpt, k_major_desc(v_rows, kBlockN, kk), k_major_desc(dot, BM, kk), kk > 0);
    lab_wgmma_commit_group();

    // P^T while dP^T is still running; queries or keys past the end get P = 0.
    lab_wgmma_wait_group<1>();
    lab_wgmma_hold(st);
    // Elements 4 n .. 4 n + 3 are columns 8 n + 2 q and + 1 of two rows: one 8-byte load of L (and of D).
#pragma unroll
    for (int i = 0; i < BM / 2; i += 4) {
      const float2 l = *reinterpret_cast<const float2*>(lt + 2 * i + 2 * q);
      st[i] = lab_exp2_ftz(fmaf(st[i], scale_log2, -l.x));
      st[i + 1] = lab_exp2_ftz(fmaf(st[i + 1], scale_log2, -l.y));
      st[i + 2] = lab_exp2_ftz(fmaf(st[i + 2], scale_log2, -l.x));
      st[i + 3] = lab_exp2_ftz(fmaf(st[i + 3], scale_log2, -l.y));
    }
    if (keys_tail || (j + 1) * BM > p.n_q) {
#pragma unroll
      for (int i = 0; i < BM / 2; ++i)
        if (!key_valid[(i / 2) % 2] || j * BM + 8 * (i / 4) + 2 * q + i % 2 >= p.n_q) st[i] = 0.f;
    }
    lab_wgmma_wait_group<0>();
    lab_wgmma_hold(dpt);
    // P^T's and dS^T's k16 chunk kk as wgmma's A fragment (the forward's layout argument for P).
    uint32_t pa[BM / 16][4], dsa[BM / 16][4];
#pragma unroll
    for (int kk = 0; kk < BM / 16; ++kk)
#pragma unroll
      for (int r = 0; r < 4; ++r) {
        const int i = 8 * kk + 2 * r;
        const float2 d = *reinterpret_cast<const float2*>(dt + 8 * (i / 4) + 2 * q);
        pa[kk][r] = lab_pack2<DT>(st[i], st[i + 1]);
        dsa[kk][r] = lab_pack2<DT>(st[i] * (dpt[i] - d.x), st[i + 1] * (dpt[i + 1] - d.y));
      }

    lab_wgmma_fence();
#pragma unroll
    for (int kk = 0; kk < BM / 16; ++kk)
      lab_wgmma_rs<DT, HEAD_DIM, 1>(dv, pa[kk], mn_major_desc(dot, BM, kk), 1);
#pragma unroll
    for (int kk = 0; kk < BM / 16; ++kk)
      lab_wgmma_rs<DT, HEAD_DIM, 1>(dk, dsa[kk], mn_major_desc(qt, BM, kk), 1);
    lab_wgmma_commit_group();

    if constexpr (FUSED_DQ) {
      // dS^T into buffer j % 2: fragment register r of chunk kk holds keys row 16 w + g + 8 (r % 2), queries
      // 16 kk + 8 (r / 2) + 2 q and + 1, stored at [query / 64][key][query % 64] swizzled.
      // Swizzled on the absolute address (per buffer: precomputed per-thread offsets would not fit in
      // registers at HEAD_DIM 64).
      uint16_t* ds = sds + (j % 2) * S::ds_elems;
      const unsigned ds_address = lab_smem_address(ds);
#pragma unroll
      for (int kk = 0; kk < BM / 16; ++kk)
#pragma unroll
        for (int r = 0; r < 4; ++r) {
          const int key = 64 * c + 16 * w + g + 8 * (r % 2), query = 16 * kk + 8 * (r / 2) + 2 * q;
          const unsigned offset = ((query / kColumns) * kBlockN + key) * 128 + (query % kColumns) * 2;
          const unsigned at = lab_swizzle_address(LAB_SWIZZLE_128B, ds_address + offset) - ds_address;
          *reinterpret_cast<uint32_t*>(reinterpret_cast<unsigned char*>(ds) + at) = dsa[kk][r];
        }
      lab_fence_proxy_async_shared();
      lab_named_barrier_sync(1, 256);

      // dQ block: queries qa .. qa + 63 of the tile, head columns da .. da + 63.
      const int qa = HEAD_DIM == 64 ? 64 * c : 0, da = HEAD_DIM == 64 ? 0 : 64 * c;
      float dq[32];
      lab_wgmma_fence();
#pragma unroll
      for (int kk = 0; kk < kBlockN / 16; ++kk)
        lab_wgmma_ss<DT, 64, 1, 1>(dq, mn_major_desc(ds + (qa / kColumns) * kBlockN * kColumns, kBlockN, kk),
                                   mn_major_desc(sk + (da / kColumns) * kBlockN * kColumns, kBlockN, kk),
                                   kk > 0);
      lab_wgmma_commit_group();
      lab_wgmma_wait_group<1>();  // dV and dK done: the stage may be refilled
      lab_wgmma_hold(dk);
      lab_wgmma_hold(dv);
      lab_mbarrier_arrive(&empty[s]);
      lab_wgmma_wait_group<0>();
      lab_wgmma_hold(dq);
      float* dq_rows = p.dq_acc + (size_t(bh) * p.n_q + j * BM + qa) * HEAD_DIM + da;
#pragma unroll
      for (int i = 0; i < 32; i += 2) {
        const int row = 16 * w + g + 8 * ((i / 2) % 2);
        if (j * BM + qa + row < p.n_q)
          lab_red_add_f32x2(dq_rows + size_t(row) * HEAD_DIM + 8 * (i / 4) + 2 * q, dq[i], dq[i + 1]);
      }
    } else {
      lab_wgmma_wait_group<0>();
      lab_wgmma_hold(dk);
      lab_wgmma_hold(dv);
      lab_mbarrier_arrive(&empty[s]);
    }
  }

  // dK (times scale) and dV rounded to the element type, two columns per 4-byte store.
  const size_t k_off = size_t(bh) * p.n_k * HEAD_DIM;
#pragma unroll
  for (int i = 0; i < HEAD_DIM / 2; i += 2) {
    const int r = (i / 2) % 2;
    if (!key_valid[r]) continue;
    const size_t at = k_off + size_t(key0 + 8 * r) * HEAD_DIM + 8 * (i / 4) + 2 * q;
    *reinterpret_cast<uint32_t*>(p.dk + at) = lab_pack2<DT>(dk[i] * p.scale, dk[i + 1] * p.scale);
    *reinterpret_cast<uint32_t*>(p.dv + at) = lab_pack2<DT>(dv[i], dv[i + 1]);
  }
}
