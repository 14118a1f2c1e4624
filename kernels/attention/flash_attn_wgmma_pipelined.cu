// flash_attn_wgmma_pipelined: the Hopper Flash Attention forward of flash_attn_wgmma.cu (same CTA, producer,
// shared memory, layouts, precision and outputs) with each consumer's tiles pipelined inside the warpgroup:
// the softmax of tile j runs while P V of tile j - 1 is on the tensor cores.
//
// Consumer schedule (FA3's intra-warpgroup overlap). Tile 0 is peeled: S_0, wait, softmax -> P_0. Then for
// each next tile j: issue S_j = Q K_j^T and O += P_{j-1} V_{j-1} back to back as two commit groups; wait for
// S_j only (wait_group 1) and release K_j; the online softmax of S_j while P_{j-1} V_{j-1} runs; wait for it
// (wait_group 0) and release V_{j-1}; rescale O by tile j's alpha (O now holds tiles 0..j-1 at tile j's row
// maxima); round P_j into the A fragments (not earlier: P_{j-1}'s fragments are the running product's
// operands until the wait). Last, O += P_last V_last. Every wgmma is outside a branch (ptxas would serialise
// all of them, C7520). Registers: S_j (BN / 2 floats), P_{j-1} (BN / 4) and O (HEAD_DIM / 2) are live
// together.
// EXP2_FMA of every 8 exponentials run on the FMA pipe (exp2_fma), the rest on the MUFU unit: at HEAD_DIM 64
// its 16 ex2 a clock per SM take as long as the tensor cores' products of the same scores (256 FLOP each).
// K and V of a stage have their own empty barriers (FwdShared's SPLIT_EMPTY): V_{j-1} is released a whole
// softmax after K_j, and with one barrier the producer could refill neither until then.
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

// Forward: grid (ceil(N_CTX_Q / 128), BH), one query block a CTA, or persistent (G, 1) with G up to a CTA an
// SM, each CTA walking blocks G apart (QueryBlocks): its K/V ring slots run on from block to block, the
// producer loads the next block's Q as soon as both consumers have issued their last S (q_empty), so that load
// and the next block's first K tiles land under this block's last P V and epilogue, and no wave of CTAs ends
// half empty. Block 384, dynamic shared memory Smem<..., true>::bytes + 1024 (the regions are aligned up to
// 1024 bytes inside it).
template <int DT, int HEAD_DIM, int BN, int STAGES, int EXP2_FMA>
__global__ void __launch_bounds__(384, 1)
    flash_attn_wgmma_fwd_pipelined(const __grid_constant__ lab::FlashAttnWgmmaFwdParams p) {
  using namespace fa_wgmma;
  LAB_DYNAMIC_SHARED(unsigned char, raw);
  const FwdShared<HEAD_DIM, BN, STAGES, true> sh(lab_smem_align_1024(raw));

  const int tiles = (p.n_k + BN - 1) / BN;
  if (!start_consumer(p, sh, tiles)) return;
  const QueryBlocks blocks(p);
  int slot0 = 0;  // ring slot of this block's tile 0
  for (int n = 0, block = blocks.first; block < blocks.total; ++n, block += blocks.stride, slot0 += tiles) {
    const ConsumerThread me(sh.q, p.scale, block, blocks.per_head);
    float o[HEAD_DIM / 2];
    zero_output<HEAD_DIM>(o);
    float row_max[2] = {kMasked, kMasked}, row_sum[2] = {0.f, 0.f}, alpha[2];
    float sc[BN / 2];
    uint32_t pa[BN / 16][4];

    // Tile 0: its scores and softmax; O is still zero, so neither a rescale nor a product yet.
    lab_mbarrier_wait_parity(sh.q_full, n & 1);
    lab_mbarrier_wait_parity(&sh.k_full[slot0 % STAGES], (slot0 / STAGES) & 1);
    lab_wgmma_fence();
    issue_scores<DT, HEAD_DIM, BN>(sc, me.sq_rows, sh.k_stage(slot0 % STAGES));
    lab_wgmma_commit_group();
    lab_wgmma_wait_group<0>();
    lab_wgmma_hold(sc);
    lab_mbarrier_arrive(&sh.k_empty[slot0 % STAGES]);
    online_softmax<BN, EXP2_FMA, kStaleLog2>(sc, 0, p.n_k, me.q, me.scale_log2, row_max, row_sum, alpha);
    pack_p<DT, BN>(sc, pa);

    for (int j = 1; j < tiles; ++j) {
      const int slot = slot0 + j, s = slot % STAGES, prev = (slot - 1) % STAGES;
      const unsigned prev_parity = ((slot - 1) / STAGES) & 1;
      lab_mbarrier_wait_parity(&sh.k_full[s], (slot / STAGES) & 1);
      lab_wgmma_fence();
      issue_scores<DT, HEAD_DIM, BN>(sc, me.sq_rows, sh.k_stage(s));
      lab_wgmma_commit_group();
      lab_mbarrier_wait_parity(&sh.v_full[prev], prev_parity);
      issue_pv<DT, HEAD_DIM, BN>(o, pa, sh.v_stage(prev));
      lab_wgmma_commit_group();
      lab_wgmma_wait_group<1>();  // S_j; P_{j-1} V_{j-1} may still run
      lab_wgmma_hold(sc);
      lab_mbarrier_arrive(&sh.k_empty[s]);
      online_softmax<BN, EXP2_FMA, kStaleLog2>(sc, j, p.n_k, me.q, me.scale_log2, row_max, row_sum, alpha);
      // The softmax stays before the wait for P V: the hold keeps the compiler from sinking the exponentials
      // to P's packing, and the block boundary, which reads the row sums, keeps ptxas from hoisting the wgmma
      // wait above them or sinking the sums below it.
      lab_wgmma_hold(sc);
      block_boundary(&sh.v_full[prev], prev_parity, row_sum);
      lab_wgmma_wait_group<0>();
      lab_wgmma_hold(o);
      lab_mbarrier_arrive(&sh.v_empty[prev]);
      rescale_output<HEAD_DIM, true>(o, alpha);
      pack_p<DT, BN>(sc, pa);
    }
    lab_mbarrier_arrive(sh.q_empty);  // every S of this block has completed: Q's buffer is free

    const int last = slot0 + tiles - 1;
    lab_mbarrier_wait_parity(&sh.v_full[last % STAGES], (last / STAGES) & 1);
    lab_wgmma_fence();
    issue_pv<DT, HEAD_DIM, BN>(o, pa, sh.v_stage(last % STAGES));
    lab_wgmma_commit_group();
    lab_wgmma_wait_group<0>();
    lab_wgmma_hold(o);
    lab_mbarrier_arrive(&sh.v_empty[last % STAGES]);
    store_outputs<DT, HEAD_DIM>(p, o, row_max, row_sum, me.bh, me.row0, me.q);
  }
}
