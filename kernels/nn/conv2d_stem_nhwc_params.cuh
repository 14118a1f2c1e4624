// Parameters of conv2d_stem_nhwc (conv2d_stem_nhwc.cu), shared by the kernel and Conv2dStemNhwcOp: plain
// data, passed by value.
#pragma once

namespace lab {

constexpr int kConv2dStemThreads = 128;  // the block: one output pixel a thread

struct Conv2dStemNhwcParams {
  const float* in;      // [N][3][H][W] float32, contiguous: the network's input
  const float* weight;  // [C_out][3][3][3] float32
  const float* bias;    // [C_out]
  void* out;   // NHWC, the kernel's element type: element (m, c) at out[m * out_pitch + c], m = (n * Ho + oy)
               // * Wo + ox
  int m;       // output pixels: N * Ho * Wo
  int h, w;    // input height and width
  int ho, wo;  // output height and width: (h - 1) / 2 + 1, (w - 1) / 2 + 1
  int out_pitch;  // channels per output pixel, a multiple of 8 (16-byte stores)
  int silu;       // 1: SiLU after the bias
};

}  // namespace lab
