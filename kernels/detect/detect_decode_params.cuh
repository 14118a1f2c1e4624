// Parameters of detect_decode (detect_decode.cu), shared by the kernel and the host that launches it: plain
// data, passed by value.
#pragma once

namespace lab {

struct DetectDecodeParams {
  const float* raw;       // [B, 4, A]: l, t, r, b in grid units
  const float* anchor_x;  // [A]: anchor centres in grid units (cell x + 0.5)
  const float* anchor_y;  // [A]
  const float* strides;   // [A]: the level stride of each anchor
  float* out;             // [B, 4, A]: cx, cy, w, h in input pixels
  int anchors;            // A
};

}  // namespace lab
