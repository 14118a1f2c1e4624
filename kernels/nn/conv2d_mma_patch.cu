// conv2d_mma_patch: the dense 3x3 Conv2d (stride 1 or 2) of conv2d_mma on fp16 / bf16 tensor cores
// (variants v7_fp16_patch, DT = LAB_F16, and v8_bf16_patch, LAB_BF16), its input staged once per channel
// block as a shared patch instead of once per tap. Same operation, layouts, epilogue (bias, SiLU, residual,
// pre, the SiLU-backward gate) and split-K partials as conv2d_mma; activations stay float32 in memory.
//
// conv2d_mma_patch<DT, S, TM>: out[co][y][x] = sum_{ci, ky, kx} W[co][ci][ky][kx] in[ci][S y + ky - 1][S x +
// kx - 1].
//   A CTA computes TM output channels x a tile of kRows output rows x 16 columns; each warp owns kWarpM
//   channels (32 at stride 1, 16 at TM 16 and at stride 2) x 2 rows x 16 columns (four n8 tiles: a row's
//   columns 0-7 and 8-15): tiles of 8 x 16 (TM 64) or 16 x 16 at stride 1, 4 x 16 (TM 64) or 8 x 16 (TM 32)
//   at stride 2 (which takes no 16-channel tile). The reduction walks blocks of 16 input channels, double
//   buffered in shared memory, one __syncthreads a block:
//   - the patch: the block's 16 channels at the tile's input positions ((kRows - 1) S + 3 rows of
//     (16 - 1) S + 3 columns, the halo included, zero outside the image and past c_in), rounded to DT,
//     position-major with the 16 channels contiguous (kPatchLd = 24 halves a position: the eight 16-byte rows
//     of an ldmatrix, 8 consecutive positions, fall in distinct banks; at stride 2 a row's even and odd
//     columns are two runs, so 8 output columns still read 8 consecutive positions). A thread stages a few
//     (position, 8 channels) items of the next block, one at a time between the taps' products
//     (PatchStaging): 8 float loads (one a channel plane, a warp's loads consecutive columns) into
//     registers, a few taps later one 16-byte store;
//   - the weights: wh [C_out][9][c_in_pad] (DT, tap-major, channels padded to 16 with zeros), a block's
//     9 x 16 values of each channel two 16-byte cp.async pieces a tap, into w_s[TM][9 * 16 + 8];
//   - per tap (ky, kx), the B fragment of an n8 tile pair is one ldmatrix.x4 of the patch at the tap's
//     offset (input row S r + ky, columns S x + kx), the A fragment one of w_s's columns tap * 16 ..: 9 taps
//     x (kWarpM / 16) x 4 products a warp a block, where conv2d_mma staged every one of the 144 im2col rows
//     from global memory (each input value loaded up to 9 times, the loads of one 32-row chunk hidden behind
//     8 products).
//   The products accumulate in float; the sum's order is (block, tap, channel), so results equal conv2d_mma's
//   up to float rounding. The accumulators go to nn::MmaChannelRow::store (pixel pairs where the output
//   width and every view keep them 8-byte aligned). Grid (tiles_y * tiles_x, ceil(C_out / TM), B * splits);
//   split s sums blocks [s * blocks_per_split, ..) into its partial plane (conv2d_splitk_reduce adds them).
//   Two CTAs an SM (up to 128 registers, no spills on sm_90; 40-75 KB of dynamic shared memory each).
//   Needs sm_80 or newer; the cpu emulator runs it through its mma / ldmatrix / cp.async model.
//   Expect rel L2 ~2e-4 (fp16) / ~2e-3 (bf16) against float64, as conv2d_mma. The op runs v7 for the fp16
//   stride-1 convs and v8 only when forced (choose_conv_variant in conv2d_op.cpp says why).
#ifndef LAB_NN_CONV2D_MMA_PATCH_CU
#define LAB_NN_CONV2D_MMA_PATCH_CU
#include "common/lab.cuh"
#include "common/lab_mma.cuh"
#include "nn/mma_epilogue.cuh"
#include "nn/nn_common.cuh"
#include "nn/patch_staging.cuh"

namespace nn {

constexpr int kPatchCols = 16;  // output columns of a tile

// The tile geometry of conv2d_mma_patch<.., S, TM> (also what the op's launch and shared-memory size use).
// The patch holds the tile's kInRows x kInCols input positions; at stride 2 each row's even and odd columns
// are two runs of kColSlots positions (position()), so that a tap's 8 consecutive output columns read 8
// consecutive positions (conflict-free ldmatrix) at either stride.
template <int S, int TM>
struct PatchTile {
  static_assert(S == 1 || TM >= 32, "stride 2 takes 32- and 64-channel tiles");
  // Output channels a warp: 32 at stride 1 (16 at TM 16); 16 at stride 2, whose larger patch (twice the
  // input rows and columns) would otherwise take more items a thread than the registers hold.
  static constexpr int kWarpM = S == 1 && TM >= 32 ? 32 : 16;
  static constexpr int kMTiles = kWarpM / 16;
  static constexpr int kWarpsM = TM / kWarpM;
  static constexpr int kWarpsN = 8 / kWarpsM;
  static constexpr int kRows = 2 * kWarpsN;  // output rows a tile
  static constexpr int kInRows = (kRows - 1) * S + 3, kInCols = (kPatchCols - 1) * S + 3;
  static constexpr int kColSlots = (kInCols + S - 1) / S;  // positions a row's run of one column parity
  static constexpr int kInputs = kInRows * kInCols;      // input positions the patch covers
  static constexpr int kPositions = kInRows * S * kColSlots;
  static constexpr int kPatchElems = kPositions * kPatchLd;
  static constexpr int kWeightElems = TM * kPatchWeightLd;
  static constexpr int kItems = (2 * kInputs + kThreads - 1) / kThreads;  // (position, octet) a thread
  static constexpr int kSharedBytes = 2 * (kPatchElems + kWeightElems) * 2;

  // The patch position of the patch's input row `row`, column `col`.
  static __device__ __forceinline__ int position(int row, int col) {
    return (row * S + col % S) * kColSlots + col / S;
  }
};


}  // namespace nn

template <int DT, int S, int TM>
__global__ void __launch_bounds__(nn::kThreads, nn::kPatchCtasPerSm)
    conv2d_mma_patch(const float* __restrict__ in, long long in_bs, long long in_cs,
                     const uint16_t* __restrict__ wh, int c_in_pad, const float* __restrict__ bias,
                     const float* residual, long long res_bs, long long res_cs, float* out, long long out_bs,
                     long long out_cs, float* pre, long long pre_bs, long long pre_cs, const float* gate,
                     long long gate_bs, long long gate_cs, int c_in, int c_out, int h_in, int w_in, int h,
                     int w, int tiles_x, int silu, int batch, int blocks_per_split, float* partial) {
  using Tile = nn::PatchTile<S, TM>;
  LAB_DYNAMIC_SHARED(uint16_t, smem);  // w_s[2][kWeightElems], then p_s[2][kPatchElems]
  const auto w_s = [smem](int buf) { return smem + buf * Tile::kWeightElems; };
  const auto p_s = [smem](int buf) { return smem + 2 * Tile::kWeightElems + buf * Tile::kPatchElems; };

  const int tid = threadIdx.x, lane = tid % 32, warp = tid / 32;
  const int wm = warp / Tile::kWarpsN, wn = warp % Tile::kWarpsN;
  const int b = blockIdx.z % batch, split = blockIdx.z / batch;
  const int co0 = blockIdx.y * TM;
  const int oy0 = int(blockIdx.x) / tiles_x * Tile::kRows, ox0 = int(blockIdx.x) % tiles_x * nn::kPatchCols;
  const int blocks = (c_in + nn::kPatchBlock - 1) / nn::kPatchBlock;
  const int blk_begin = split * blocks_per_split, blk_end = min(blocks, blk_begin + blocks_per_split);
  nn::PatchStaging<Tile> patch(in + b * in_bs, int(in_cs), c_in, h_in, w_in, oy0 * S - 1, ox0 * S - 1);

  float acc[Tile::kMTiles][4][4] = {};
  if (blk_begin < blk_end) {
    nn::stage_patch_weights_async<TM>(w_s(0), wh, c_in_pad, blk_begin, co0, c_out);
    patch.template load_store<DT>(blk_begin, p_s(0));
    lab_cp_async_wait<0>();
    __syncthreads();
  }
  // The lane's ldmatrix row of an n8 tile pair: column lane % 8 (+ 8 for lanes 16..31), channels 0-7 or 8-15.
  const int b_col = lane % 8 + (lane / 16) * 8, b_k = (lane / 8) % 2 * 8;
  for (int blk = blk_begin; blk < blk_end; ++blk) {
    const int buf = (blk - blk_begin) % 2;
    const bool more = blk + 1 < blk_end;
    if (more) nn::stage_patch_weights_async<TM>(w_s(buf ^ 1), wh, c_in_pad, blk + 1, co0, c_out);
#pragma unroll
    for (int tap = 0; tap < 9; ++tap) {
      const int ky = tap / 3, kx = tap % 3;
      if (more) patch.template stage_at_tap<DT>(tap, blk + 1, p_s(buf ^ 1));
      uint32_t a[Tile::kMTiles][4];
#pragma unroll
      for (int mt = 0; mt < Tile::kMTiles; ++mt)
        lab_load_a<nn::kPatchWeightLd>(a[mt], w_s(buf), wm * Tile::kWarpM + mt * 16, tap * nn::kPatchBlock,
                                       lane);
#pragma unroll
      for (int np = 0; np < 2; ++np) {
        uint32_t bf[4];
        const int position = Tile::position((wn * 2 + np) * S + ky, b_col * S + kx);
        lab_ldmatrix_x4(bf, p_s(buf) + position * nn::kPatchLd + b_k);
#pragma unroll
        for (int mt = 0; mt < Tile::kMTiles; ++mt)
          lab_mma_16816_pair<DT>(acc[mt][2 * np], acc[mt][2 * np + 1], a[mt], bf);
      }
    }
    if (more) patch.template finish_block<DT>(p_s(buf ^ 1));
    lab_cp_async_wait<0>();
    __syncthreads();
  }

  // Each lane holds columns 2t, 2t + 1 of four n8 tiles (row wn * 2 + nt / 2, columns 8 (nt % 2) ..) for two
  // channels of each m16 tile.
  const int g = lane / 4, t = lane % 4;
  const bool pairs = (w & 1) == 0 && nn::mma_pairs_aligned(h * w, out, out_bs, out_cs, pre, pre_bs, pre_cs,
                                                           residual, res_bs, res_cs, gate, gate_bs, gate_cs,
                                                           partial);
#pragma unroll
  for (int mt = 0; mt < Tile::kMTiles; ++mt)
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      const int co = co0 + wm * Tile::kWarpM + mt * 16 + g + 8 * half;
      if (co >= c_out) continue;
      const nn::MmaChannelRow row(co, b, split, batch, c_out, h * w, bias, silu, out, out_bs, out_cs, pre, pre_bs,
                                  pre_cs, residual, res_bs, res_cs, gate, gate_bs, gate_cs, partial);
      float v0[4], v1[4];
      int p[4], left[4];
#pragma unroll
      for (int nt = 0; nt < 4; ++nt) {
        const int y = oy0 + wn * 2 + nt / 2, x = ox0 + nt % 2 * 8 + 2 * t;
        v0[nt] = acc[mt][nt][2 * half], v1[nt] = acc[mt][nt][2 * half + 1];
        p[nt] = y * w + x, left[nt] = y < h ? w - x : 0;
      }
      row.store(v0, v1, p, left, pairs);
    }
}

#endif  // LAB_NN_CONV2D_MMA_PATCH_CU
