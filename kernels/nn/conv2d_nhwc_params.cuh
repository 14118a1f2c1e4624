// The parameter struct of kernels/nn/conv2d_nhwc.cu (host and device) and the tile arithmetic both sides
// share. The kernel takes it as `const __grid_constant__` so the tensor maps stay in parameter space for the
// TMA instructions. lab::TensorMap comes from common/lab_tensor_map.cuh, included first: by the kernel, and
// on the host by nvrtc_runtime/tensor_map.hpp.
//
// Activations are NHWC, 16-bit (fp16 or bf16) or float (the tf32 network), with a pitch: element (pixel, c)
// of a tensor lies at data[pixel * pitch + c], pixel = (n * H + y) * W + x; the pitch and the channel offset
// of a slice are multiples of 8 (16-byte aligned rows for the tensor maps and the epilogue's 8-channel
// stores).
#pragma once

namespace lab {

struct Conv2dNhwcParams {
  // A: the input x. 3x3: an im2col map over [N][H][W][C_in] (channels per pixel BK, BM pixels per column,
  // bounding box corners -1 / -1, traversal strides = the conv stride). 1x1: a tiled map over [N*H*W][C_in],
  // box [BM][BK]. BM = 64 * CONSUMERS, the output pixels of a CTA. Both of the activations' element type,
  // dims[0] = C_in so channels past C_in load as zeros, swizzle = a row's BK elements in bytes.
  TensorMap x_map;
  // B: the weights [C_out][K*K][C_in] (rows padded to a multiple of 8 channels), box [BN][1][BK], same
  // swizzle; output channels past C_out load as zeros. 3xTF32 (LAB_F32X3): the weights rounded to nearest
  // tf32.
  TensorMap w_map;
  // 3xTF32 only (unused otherwise): the weights' remainders, w - w_map's, in w_map's layout and box.
  TensorMap w_lo_map;
  const float* bias;         // [C_out]
  const void* residual;      // null, or NHWC of the output's shape: element (m, c) at m * res_pitch + c
  void* out;                 // element (m, c) at m * out_pitch + c (the slice's channel 0)
  int m;                     // output pixels: N * Ho * Wo
  int n_tiles;               // ceil(C_out / BN): channel tiles per pixel tile
  int tiles;                 // ceil(M / BM) * n_tiles: the output tiles the persistent grid walks
  int c_out;                 // a multiple of 8
  int ho, wo;                // output height and width
  int stride;                // 1 or 2 (3x3); 1 (1x1)
  int channel_blocks;        // ceil(C_in / BK): copies per filter tap
  int out_pitch, res_pitch;  // channels per pixel of the output and residual buffers
  int silu;                  // 1: SiLU after the bias
};

// conv2d_nhwc_splitk's parameters (split-K, one consumer: BM 64): work unit u = tile * splits + slice reduces
// the steps [slice * steps / splits, (slice + 1) * steps / splits) of output tile u / splits (steps = taps x
// channel blocks) into its slice of `partial`; the tile's last unit to arrive sums the slices in order and
// runs the epilogue.
struct Conv2dNhwcSplitParams {
  Conv2dNhwcParams conv;  // conv.tiles: the output tiles (units: tiles x splits)
  float* partial;         // [tiles][splits][BN / 8][128] float4s: a slice's accumulators, thread fastest
  unsigned* arrivals;     // [tiles]: zero before a launch, and the launch leaves them zero
  int splits;             // 2 .. steps
};

#if defined(__CUDACC_RTC__) || defined(__CUDACC__)
#define LAB_CONV2D_NHWC_FN __host__ __device__ constexpr
#else
#define LAB_CONV2D_NHWC_FN constexpr
#endif

// Bytes of one pipeline stage: the A tile (BM pixels x BK channels) and the B tile (BN channels x BK), rows
// of `row_bytes` (BK times the element's bytes); `operands` 2 (3xTF32) also holds A_lo and B_lo after them.
LAB_CONV2D_NHWC_FN unsigned conv2d_nhwc_stage_bytes(int bm, int bn, int row_bytes, int operands) {
  return unsigned(operands) * unsigned(bm + bn) * unsigned(row_bytes);
}

// The launch's dynamic shared memory: the stages, a full and an empty mbarrier per stage, 1024 bytes of
// alignment slack (the kernel aligns the stages to the 128-byte swizzle pattern).
LAB_CONV2D_NHWC_FN unsigned conv2d_nhwc_shared_bytes(int bm, int bn, int row_bytes, int operands,
                                                     int stages) {
  return unsigned(stages) * conv2d_nhwc_stage_bytes(bm, bn, row_bytes, operands) + unsigned(stages) * 16u +
         1024u;
}

// CTAs of one instance an SM holds, the kernel's launch bounds (registers bounded to fit) and the op's
// persistent grid (SMs x this): N tiles up to 64 channels (32 accumulators a consumer thread) fit one more.
// Their shared memory fits too: at most 2 x 97 KB (two consumers, BN 64) or 3 x 66 KB (one consumer, BN 64);
// 3xTF32 (four operand tiles, 128-byte rows in 3 stages: conv2d_nhwc_tiles) 1 x 193 KB (two consumers, BN
// 128) or 2 x 97 KB (one consumer, BN 64).
// `operands` 2 (3xTF32) takes one CTA fewer (at least one): its step's products need a second accumulator.
LAB_CONV2D_NHWC_FN int conv2d_nhwc_ctas_per_sm(int bn, int consumers, int operands = 1) {
  const int ctas = (bn <= 64 ? 4 : 3) - consumers - (operands - 1);
  return ctas < 1 ? 1 : ctas;
}

// CTAs of conv2d_nhwc_splitk an SM holds, its launch bounds (128 registers a thread): two. The split's state
// (slice, step range, workspace) spills at the 80 registers of three BN-64 CTAs, and the split runs where the
// tiles leave SMs idle (one CTA an SM, kConv2dNhwcSplitRule), so a third would add nothing.
LAB_CONV2D_NHWC_FN int conv2d_nhwc_splitk_ctas_per_sm() {
  return 2;
}

#undef LAB_CONV2D_NHWC_FN

}  // namespace lab
