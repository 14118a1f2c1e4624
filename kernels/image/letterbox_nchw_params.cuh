// Parameters of letterbox_nchw (letterbox_nchw.cu), shared by the kernel and the host that launches it: plain
// data, passed by value.
#pragma once

namespace lab {

struct LetterboxNchwParams {
  const unsigned char* image;  // [B, src_h, src_w, 3]: the resized RGB8 images, row-major
  float* out;                  // [B, 3, dst_h, dst_w]: R, G, B planes of value / 255
  int src_h, src_w;            // the resized image
  int dst_h, dst_w;            // the letterbox (network input)
  int top, left;               // where the image's first pixel lands; every other pixel is padding
  int pad;                     // the padding value, 0..255 (Ultralytics: 114)
};

}  // namespace lab
