// Activations of the NHWC network: [B, H, W, C] fp16 / bf16 / float views into the plan's arena, element
// (pixel, c) at data[pixel * pitch + c] (NhwcView), the pitch the channels rounded up to 8. A channel slice
// (a concatenation input, a C2f chunk) is a view at a channel offset, a multiple of 8 (16-byte rows).
#pragma once
#include <cstdint>

#include "kernels/nn/conv2d_nhwc_op.hpp"
#include "pipeline/executor/activation.hpp"

namespace lab {

struct NhwcActivation {
  unsigned char* data = nullptr;  // elements of `type`
  ActivationType type = ActivationType::f16;
  int pitch = 0;
  int batch = 0, channels = 0, height = 0, width = 0;

  int64_t pixels() const { return int64_t(batch) * height * width; }
  NhwcView view() const { return {data, pitch}; }
  // Channels [first, first + count); RuntimeError unless first is a multiple of 8.
  NhwcActivation slice(int first, int count) const;
};

// A new [batch, height, width] x channels tensor of `type` from the arena (pitch nhwc_min_pitch(channels)).
NhwcActivation take_nhwc(Arena& arena, ActivationType type, int batch, int channels, int height, int width);

}  // namespace lab
