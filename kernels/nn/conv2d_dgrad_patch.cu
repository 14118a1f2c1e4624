// conv2d_dgrad_patch: the input gradient of a dense 3x3 stride-2 Conv2d on fp16 / bf16 tensor cores (variants
// v6_fp16_patch, DT = LAB_F16, and v7_bf16_patch, LAB_BF16), dz staged once per block of 16 output channels
// as a shared patch (nn/patch_staging.cuh) instead of once per tap and stride-phase class as
// conv2d_dgrad_mma. Same parameters (Conv2dDgradParams, w_half in this kernel's layout), epilogue (written,
// accumulated, or gated by the producer's SiLU backward) and float32 dx.
//
// conv2d_dgrad_patch<DT, TM>: dx[ci][iy][ix] = sum_{co, ky, kx} W[co][ci][ky][kx] dz[co][(iy + 1 - ky) / 2]
// [(ix + 1 - kx) / 2] over the taps where both divide evenly (1, 2 or 4 of the 9 by the pixel's parities).
//   A CTA computes TM input channels x a tile of kRows dx rows x 32 columns (kRows even, the tile's origin
//   even); each warp owns 16 channels x 2 rows x 32 columns as eight n8 tiles, each 8 pixels of one row and
//   one column parity (columns 2 j + px, j = 8 h .. 8 h + 7). A tap (ky, kx) reaches the row of parity
//   (ky + 1) % 2 and the columns of parity (kx + 1) % 2, so each tap multiplies two of the eight tiles, and
//   their dz positions are consecutive: row r / 2 + dr, columns j + dc with dr, dc = 1 for a tap index 0,
//   else 0. The dz patch of a 16-channel block is (kRows / 2 + 1) x 17 positions (zero past dz's plane and
//   past c_out); a tap's B operand for its two tiles is one ldmatrix.x4 of it (four distinct ones serve the
//   nine taps), its A operand the tap's 16 x 16 block of the weights, stored [C_in][9][c_out_pad] (DT,
//   tap-major, zero-padded) and staged by cp.async. 9 x 2 products a warp a block, one __syncthreads.
//   dx pixels of one tile are two columns apart, so the epilogue goes through shared memory: the warps'
//   fragments into rows of 32 columns, then each warp stores whole rows (128 bytes a store; storing the
//   fragments directly wrote 8 channels' rows a store, 8 bytes of each 32-byte sector). Grid (tiles_y *
//   tiles_x, ceil(C_in / TM), B); no split-K (the input gradient's plane is 4x dz's).
//   Needs sm_80 or newer; the cpu emulator runs it through its mma / ldmatrix / cp.async model. Expect rel L2
//   ~2e-4 (fp16) / ~2e-3 (bf16) against float64, as conv2d_dgrad_mma.
#ifndef LAB_NN_CONV2D_DGRAD_PATCH_CU
#define LAB_NN_CONV2D_DGRAD_PATCH_CU
#include "common/lab.cuh"
#include "common/lab_mma.cuh"
#include "nn/conv2d_backward_params.cuh"
#include "nn/nn_common.cuh"
#include "nn/patch_staging.cuh"

namespace nn {

constexpr int kDgradPatchCols = 32;  // dx columns of a tile

// The tile geometry of conv2d_dgrad_patch<.., TM> (what the op's launch and shared-memory size use too):
// 16-channel warps, TM / 16 along the channels, the rest along the rows two at a time.
template <int TM>
struct DgradPatchTile {
  static constexpr int kWarpsM = TM / 16;
  static constexpr int kWarpsN = 8 / kWarpsM;
  static constexpr int kRows = 2 * kWarpsN;  // dx rows a tile
  static constexpr int kInRows = kRows / 2 + 1, kInCols = kDgradPatchCols / 2 + 1;  // dz positions
  static constexpr int kInputs = kInRows * kInCols;
  static constexpr int kPatchElems = kInputs * kPatchLd;
  static constexpr int kWeightElems = TM * kPatchWeightLd;
  static constexpr int kItems = (2 * kInputs + kThreads - 1) / kThreads;  // (position, octet) a thread
  static constexpr int kSharedBytes = 2 * (kPatchElems + kWeightElems) * 2;

  static __device__ __forceinline__ int position(int row, int col) { return row * kInCols + col; }
};

}  // namespace nn

template <int DT, int TM>
__global__ void __launch_bounds__(nn::kThreads, nn::kPatchCtasPerSm)
    conv2d_dgrad_patch(const lab::Conv2dDgradParams params) {
  using Tile = nn::DgradPatchTile<TM>;
  const lab::Conv2dBackwardSizes n = params.size;
  LAB_DYNAMIC_SHARED(uint16_t, smem);  // w_s[2][kWeightElems], then p_s[2][kPatchElems]
  const auto w_s = [smem](int buf) { return smem + buf * Tile::kWeightElems; };
  const auto p_s = [smem](int buf) { return smem + 2 * Tile::kWeightElems + buf * Tile::kPatchElems; };

  const int tid = threadIdx.x, lane = tid % 32, warp = tid / 32;
  const int wm = warp / Tile::kWarpsN, wn = warp % Tile::kWarpsN;
  const int b = blockIdx.z, ci0 = blockIdx.y * TM;
  const int tiles_x = (n.w_in + nn::kDgradPatchCols - 1) / nn::kDgradPatchCols;
  const int y0 = int(blockIdx.x) / tiles_x * Tile::kRows, x0 = int(blockIdx.x) % tiles_x * nn::kDgradPatchCols;
  const int plane_out = n.h_out * n.w_out, c_out_pad = (n.c_out + nn::kPatchBlock - 1) / nn::kPatchBlock *
                                                       nn::kPatchBlock;
  const int blocks = c_out_pad / nn::kPatchBlock;
  nn::PatchStaging<Tile> patch(params.grad_z + (long long)b * n.c_out * plane_out, plane_out, n.c_out, n.h_out,
                               n.w_out, y0 / 2, x0 / 2);

  nn::stage_patch_weights_async<TM>(w_s(0), params.w_half, c_out_pad, 0, ci0, n.c_in);
  patch.template load_store<DT>(0, p_s(0));
  lab_cp_async_wait<0>();
  __syncthreads();

  // The lane's ldmatrix row of a tile pair: patch column j = lane % 8 (+ 8 for lanes 16..31), channels 0-7
  // or 8-15 of the block.
  const int b_col = lane % 8 + (lane / 16) * 8, b_k = (lane / 8) % 2 * 8;
  float acc[8][4] = {};  // tile (py, px, h): dx row 2 wn + py, columns 2 (8 h + j) + px
  for (int blk = 0; blk < blocks; ++blk) {
    const int buf = blk % 2;
    const bool more = blk + 1 < blocks;
    if (more) nn::stage_patch_weights_async<TM>(w_s(buf ^ 1), params.w_half, c_out_pad, blk + 1, ci0, n.c_in);
#pragma unroll
    for (int tap = 0; tap < 9; ++tap) {
      const int ky = tap / 3, kx = tap % 3, py = (ky + 1) % 2, px = (kx + 1) % 2;
      if (more) patch.template stage_at_tap<DT>(tap, blk + 1, p_s(buf ^ 1));
      uint32_t a[4], bf[4];
      lab_load_a<nn::kPatchWeightLd>(a, w_s(buf), wm * 16, tap * nn::kPatchBlock, lane);
      const int position = Tile::position(wn + (ky == 0), b_col + (kx == 0));
      lab_ldmatrix_x4(bf, p_s(buf) + position * nn::kPatchLd + b_k);
      lab_mma_16816_pair<DT>(acc[(py * 2 + px) * 2], acc[(py * 2 + px) * 2 + 1], a, bf);
    }
    if (more) patch.template finish_block<DT>(p_s(buf ^ 1));
    lab_cp_async_wait<0>();
    __syncthreads();
  }

  // The epilogue through shared memory (the buffers are free after the loop's last __syncthreads), one half
  // of each warp's channels at a time: each lane writes its tile columns j = 2t, 2t + 1 of each n8 tile for
  // channel g (or g + 8) — dx columns 2 (8 h + j) + px, two apart — into the CTA's rows of 32 columns; then
  // each warp stores whole rows, a lane a column, so a row of 32 dx floats is one 128-byte store (and its
  // gate or accumulated values one load, all of a half's issued before the half's shared-memory pass).
  // Channel stride rows * 32 + 1 floats: a write touches banks g + 4t, at most two lanes a bank.
  float* out_s = reinterpret_cast<float*>(smem);
  constexpr int kChannelStride = Tile::kRows * nn::kDgradPatchCols + 1, kLines = TM / 2 * Tile::kRows;
  constexpr int kWarps = nn::kThreads / 32, kLinesPerWarp = kLines / kWarps;
  static_assert(TM / 2 * kChannelStride * 4 <= Tile::kSharedBytes, "half a tile of dx fits the buffers");
  static_assert(kLines % kWarps == 0, "every warp stores as many rows");
  const int g = lane / 4, t = lane % 4, plane_in = n.h_in * n.w_in, ix = x0 + lane;
  float* grad_in = params.grad_in + b * params.grad_in_batch_stride;
  const float* gate = params.gate ? params.gate + b * params.gate_batch_stride : nullptr;
  const float* prior_source = params.accumulate ? grad_in : gate;  // null: dx written as summed
  // The warp's i-th row of a half: its offset in dx, or -1 past the plane or the channels.
  const auto row_at = [&](int half, int i) -> long long {
    const int line = warp + i * kWarps, local = line / Tile::kRows, row = line % Tile::kRows;
    const int ci = ci0 + local / 8 * 16 + local % 8 + 8 * half, iy = y0 + row;
    return ci < n.c_in && iy < n.h_in && ix < n.w_in ? (long long)ci * plane_in + iy * n.w_in + ix : -1;
  };
#pragma unroll
  for (int half = 0; half < 2; ++half) {
    // The half's gate (or accumulated) values first, in flight while the fragments go through shared
    // memory: loaded between the stores, each would wait for the store before it (they may alias).
    float prior[kLinesPerWarp];
#pragma unroll
    for (int i = 0; i < kLinesPerWarp; ++i) {
      const long long at = row_at(half, i);
      prior[i] = prior_source && at >= 0 ? prior_source[at] : 0.0f;
    }
    float* channel_s = out_s + (wm * 8 + g) * kChannelStride;
#pragma unroll
    for (int tile = 0; tile < 8; ++tile) {
      const int py = tile / 4, px = tile / 2 % 2, h = tile % 2, row = 2 * wn + py;
#pragma unroll
      for (int e = 0; e < 2; ++e)
        channel_s[row * nn::kDgradPatchCols + 2 * (8 * h + 2 * t + e) + px] = acc[tile][2 * half + e];
    }
    __syncthreads();
#pragma unroll
    for (int i = 0; i < kLinesPerWarp; ++i) {
      const long long at = row_at(half, i);
      if (at < 0) continue;
      const int line = warp + i * kWarps;
      const float v =
          out_s[line / Tile::kRows * kChannelStride + line % Tile::kRows * nn::kDgradPatchCols + lane];
      if (params.accumulate)
        grad_in[at] = prior[i] + v;
      else
        grad_in[at] = gate ? nn::silu_grad(v, prior[i]) : v;
    }
    if (half == 0) __syncthreads();  // the second half's writes wait for the first half's reads
  }
}

#endif  // LAB_NN_CONV2D_DGRAD_PATCH_CU
