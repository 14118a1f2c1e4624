// The shared-patch staging of the 16-bit 3x3 convs (conv2d_mma_patch's forward and conv2d_dgrad_patch's
// input gradient): a reduction block of 16 channels of float32 NCHW input is staged once as a patch of
// positions, each position's 16 channels contiguous and rounded to DT (kPatchLd halves: the eight 16-byte rows
// of an ldmatrix, 8 consecutive positions, fall in distinct banks), and the block's weights, tap-major
// [channel][9][16], by cp.async into rows of kPatchWeightLd halves (the A operand of lab_load_a).
#pragma once
#include "common/lab.cuh"
#include "common/lab_mma.cuh"
#include "nn/nn_common.cuh"

namespace nn {

constexpr int kPatchBlock = 16;                        // input channels per reduction step
constexpr int kPatchLd = kPatchBlock + 8;              // halves per patch position
constexpr int kPatchWeightLd = 9 * kPatchBlock + 8;    // halves per channel row of w_s

// CTAs per SM the register budget must allow: 2 (up to 128 registers a thread). The unrolled taps keep
// fragments for reuse (the B fragment of row r + ky serves every (r, ky) pair with that sum): TM 64 and 32
// take 122-123 registers; TM 16 spilled at 3 CTAs' 80.
constexpr int kPatchCtasPerSm = 2;

// The patch of one channel block, an item at a time: load(k, block) reads the thread's item k (8 floats of
// 8 channels at one position) into registers, store(k, patch) rounds them to DT into a patch buffer. Item q =
// (octet, position), position-fastest so a warp's loads run along a row. One item's values live at a time: a
// main loop loads item k + 1 of the next block where it stores item k, a few taps' products after loading it.
// T, the patch's geometry: kInRows x kInCols positions of the input from (y0, x0) on (kInputs of them), kItems
// a thread, and position(row, col), where a position's 16 channels go in the patch.
template <class T>
struct PatchStaging {
  static constexpr int kTapsPerItem = 9 / T::kItems;  // the taps' products between an item's load and store
  const float* in_b;
  int in_cs, c_in, h_in, w_in, y0, x0;
  float v[8];

  // in_b: the image's channel 0 (channel stride in_cs, planes h_in x w_in); y0, x0: the patch's first input
  // row and column (negative in the padding).
  __device__ __forceinline__ PatchStaging(const float* in_b_, int in_cs_, int c_in_, int h_in_, int w_in_,
                                          int y0_, int x0_)
      : in_b(in_b_), in_cs(in_cs_), c_in(c_in_), h_in(h_in_), w_in(w_in_), y0(y0_), x0(x0_) {}

  __device__ __forceinline__ void load(int k, int block) {
    const int q = int(threadIdx.x) + k * kThreads;
    const int octet = q / T::kInputs, at_in = q % T::kInputs;
    const int y = y0 + at_in / T::kInCols, x = x0 + at_in % T::kInCols, c = block * kPatchBlock + octet * 8;
    const bool inside = q < 2 * T::kInputs && c < c_in && y >= 0 && y < h_in && x >= 0 && x < w_in;
    const float* at = in_b + (inside ? c * in_cs + y * w_in + x : 0);
#pragma unroll
    for (int j = 0; j < 8; ++j) v[j] = inside ? __ldg(at + j * in_cs) : 0.0f;
  }

  template <int DT>
  __device__ __forceinline__ void store(int k, uint16_t* patch) const {
    const int q = int(threadIdx.x) + k * kThreads;
    if (T::kItems * kThreads != 2 * T::kInputs && q >= 2 * T::kInputs) return;
    const int octet = q / T::kInputs, at_in = q % T::kInputs;
    const int pos = T::position(at_in / T::kInCols, at_in % T::kInCols);
    uint4 piece;
    piece.x = lab_pack2<DT>(v[0], v[1]);
    piece.y = lab_pack2<DT>(v[2], v[3]);
    piece.z = lab_pack2<DT>(v[4], v[5]);
    piece.w = lab_pack2<DT>(v[6], v[7]);
    *reinterpret_cast<uint4*>(patch + pos * kPatchLd + octet * 8) = piece;
  }

  // The next block's items spread over a main loop's 9 taps (unrolled): at tap `tap`, store the item loaded
  // kTapsPerItem taps before and load the next one.
  template <int DT>
  __device__ __forceinline__ void stage_at_tap(int tap, int next_block, uint16_t* patch) {
    if (tap % kTapsPerItem != 0 || tap / kTapsPerItem > T::kItems) return;
    if (tap > 0) store<DT>(tap / kTapsPerItem - 1, patch);
    if (tap / kTapsPerItem < T::kItems) load(tap / kTapsPerItem, next_block);
  }
  // After the taps: the last item, where no tap stored it.
  template <int DT>
  __device__ __forceinline__ void finish_block(uint16_t* patch) const {
    if (T::kItems * kTapsPerItem >= 9) store<DT>(T::kItems - 1, patch);
  }

  // The whole block at once (the first block, before the main loop).
  template <int DT>
  __device__ __forceinline__ void load_store(int block, uint16_t* patch) {
#pragma unroll
    for (int k = 0; k < T::kItems; ++k) {
      load(k, block);
      store<DT>(k, patch);
    }
  }
};

// cp.async of reduction block `block`'s weights (TM channels from co0, 9 taps x 16 reduction channels, 18
// 16-byte pieces a channel, from wh [c_out][9][c_in_pad]) into w_s; channels past c_out are zero-filled. 256 / TM threads share a channel, thread t
// taking its pieces t % (256 / TM) + j * (256 / TM): one source pointer a thread and a fixed step between its
// pieces (a mapping by piece index had kept each piece's address live across the main loop: 128 registers
// and spills at TM 64).
template <int TM>
__device__ __forceinline__ void stage_patch_weights_async(uint16_t* w_s, const uint16_t* __restrict__ wh,
                                                          int c_in_pad, int block, int co0, int c_out) {
  constexpr int kPieces = 9 * 2, kPerRow = kThreads / TM, kPerThread = (kPieces + kPerRow - 1) / kPerRow;
  static_assert(kPerRow % 2 == 0, "a thread's pieces are all the same half of their taps");
  const int row = int(threadIdx.x) / kPerRow, first = int(threadIdx.x) % kPerRow, co = co0 + row;
  const bool valid = co < c_out;
  const uint16_t* src = wh + ((long long)(valid ? co : 0) * 9 + first / 2) * c_in_pad + block * kPatchBlock +
                        first % 2 * 8;
  uint16_t* dst = w_s + row * kPatchWeightLd + first * 8;
#pragma unroll
  for (int j = 0; j < kPerThread; ++j) {
    if (kPieces % kPerRow != 0 && first + j * kPerRow >= kPieces) break;
    lab_cp_async_16(dst + j * kPerRow * 8, src + (long long)j * (kPerRow / 2) * c_in_pad, valid);
  }
  lab_cp_async_commit();
}

}  // namespace nn
