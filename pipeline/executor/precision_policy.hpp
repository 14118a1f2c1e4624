// The precision policy of the kernel network: which arithmetic each kind of conv uses at each network
// precision (--precision). One table (precision_policy.cpp) with the reason for every row; docs/detect.md
// quotes it with the measured errors. Everything else (the depthwise convs, pooling, decode and top-k) is
// float32 at every precision: those kernels have no tensor-core variant; so is the inference network's
// attention core, while the training pass's follows training_attention_variant.
#pragma once
#include "kernels/nn/precision.hpp"

namespace lab {

// Where a convolution sits in YOLO26.
enum class ConvRole {
  Stem,  // the first conv (layer 0): its input is the image itself
  Body,  // every other conv: backbone, neck, the PSA blocks, the detect head's branches
};

// The precision a conv of `role` runs at in a network of precision `network`.
Precision conv_precision(ConvRole role, Precision network);

// The PsaOp variant of the training pass's attention core (the gradient tape) at `network` precision and
// the attention's KEY_DIM.
const char* training_attention_variant(Precision network, int key_dim);

}  // namespace lab
