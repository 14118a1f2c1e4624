// Parameters of letterbox_resize (letterbox_resize.cu), shared by the kernel and the host that launches it:
// plain data, passed by value.
#pragma once

namespace lab {

// One resized column's (or row's) bilinear taps: the two source columns (rows) it blends and their 11-bit
// fixed-point weights (OpenCV's INTER_RESIZE_COEF_BITS: weight0 + weight1 = 2048).
struct LetterboxTap {
  int index0, index1;
  int weight0, weight1;
};

struct LetterboxResizeParams {
  const unsigned char* image;   // [src_h, src_w, 3]: the source RGB8 image, row-major
  const LetterboxTap* columns;  // [resized_w]: the source columns of each resized column
  const LetterboxTap* rows;     // [resized_h]: the source rows of each resized row
  float* out;                   // [3, dst_h, dst_w]: R, G, B planes of value / 255
  int src_w;                    // pixels per source row
  int resized_w, resized_h;     // the resized image
  int dst_w, dst_h;             // the letterbox (network input)
  int left, top;                // where the resized image's first pixel lands; every other pixel is padding
  int pad;                      // the padding value, 0..255 (Ultralytics: 114)
};

}  // namespace lab
