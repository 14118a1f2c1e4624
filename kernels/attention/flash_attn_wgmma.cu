// flash_attn_wgmma: Flash Attention forward in fp16 / bf16 for Hopper (sm_90a) — TMA copies on an mbarrier
// pipeline, wgmma products and warp specialisation. Non-causal. Same layouts, scale and L (natural-log
// logsumexp of the scaled scores) as flash_attn2_mma.cu, whose mma.sync kernel stays the portable variant.
//
// A CTA is three warpgroups (384 threads) and owns 128 query rows of one batch * head; grid
// (ceil(N_CTX_Q / 128), BH).
//   Warpgroup 0, the producer, gives registers back (setmaxnreg.dec) and one of its threads issues every
//   copy:
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
//   [STAGES][HEAD_DIM / 64][BN rows][64] — column blocks of 64 elements, 128-byte rows in the 128-byte
//   swizzle the copies write (common/lab_swizzle.cuh) — then the mbarriers. Rows past N_CTX_Q / N_CTX_K load
//   as zeros (the maps' bounds); their scores are masked and their outputs not stored.
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
#include "attention/flash_attn_wgmma_fwd_steps.cuh"

// Forward: grid (ceil(N_CTX_Q / 128), BH), block 384, dynamic shared memory Smem<...>::bytes + 1024 (the
// regions are aligned up to 1024 bytes inside it): one query block a CTA (the persistent grid is the
// pipelined kernel's). Each consumer runs its tiles one after the other: S, wait, softmax, P V, wait.
// EXP2_FMA of every 8 softmax exponentials run on the FMA pipe (exp2_fma.cuh), the rest on the MUFU unit.
template <int DT, int HEAD_DIM, int BN, int STAGES, int EXP2_FMA>
__global__ void __launch_bounds__(384, 1)
    flash_attn_wgmma_fwd(const __grid_constant__ lab::FlashAttnWgmmaFwdParams p) {
  using namespace fa_wgmma;
  LAB_DYNAMIC_SHARED(unsigned char, raw);
  const FwdShared<HEAD_DIM, BN, STAGES> sh(lab_smem_align_1024(raw));

  const int tiles = (p.n_k + BN - 1) / BN;
  if (!start_consumer(p, sh, tiles)) return;
  const QueryBlocks blocks(p);
  const ConsumerThread me(sh.q, p.scale, blocks.first, blocks.per_head);
  float o[HEAD_DIM / 2];
  zero_output<HEAD_DIM>(o);
  float row_max[2] = {kMasked, kMasked}, row_sum[2] = {0.f, 0.f};

  lab_mbarrier_wait_parity(sh.q_full, 0);
  for (int j = 0; j < tiles; ++j) {
    const int s = j % STAGES;
    const unsigned parity = (j / STAGES) & 1;

    float sc[BN / 2];
    lab_mbarrier_wait_parity(&sh.k_full[s], parity);
    lab_wgmma_fence();
    issue_scores<DT, HEAD_DIM, BN>(sc, me.sq_rows, sh.k_stage(s));
    lab_wgmma_commit_group();
    lab_wgmma_wait_group<0>();
    lab_wgmma_hold(sc);

    float alpha[2];
    online_softmax<BN, EXP2_FMA>(sc, j, p.n_k, me.q, me.scale_log2, row_max, row_sum, alpha);
    rescale_output<HEAD_DIM>(o, alpha);
    uint32_t pa[BN / 16][4];
    pack_p<DT, BN>(sc, pa);

    lab_mbarrier_wait_parity(&sh.v_full[s], parity);
    lab_wgmma_fence();
    issue_pv<DT, HEAD_DIM, BN>(o, pa, sh.v_stage(s));
    lab_wgmma_commit_group();
    lab_wgmma_wait_group<0>();
    lab_wgmma_hold(o);
    lab_mbarrier_arrive(&sh.k_empty[s]);  // K and V of the stage (one barrier)
  }
  store_outputs<DT, HEAD_DIM>(p, o, row_max, row_sum, me.bh, me.row0, me.q);
}
