// The precision policy of the kernel network: which arithmetic each kind of layer uses at each network
// precision (--precision). One table (precision_policy.cpp) with the reason for every row; docs/detect.md
// quotes it with the measured errors. Everything not in the table (depthwise convs, pooling, the attention
// core, decode, top-k) is float32 at every precision.
#pragma once
#include "nn/precision.hpp"

namespace lab {

// Where a convolution sits in YOLO26.
enum class ConvRole {
  Body,        // backbone and neck convs, the PSA blocks' feed-forward convs
  Attention,   // a PSA block's qkv, positional (pe) and output (proj) convs
  HeadHidden,  // the detect head's branch convs before the last
  HeadOutput,  // the last conv of each box / class branch: the raw box distances and class logits
};

// The precision a conv of `role` runs at in a network of precision `network`.
Precision conv_precision(ConvRole role, Precision network);

}  // namespace lab
