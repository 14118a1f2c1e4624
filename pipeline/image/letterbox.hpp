// The Ultralytics letterbox (spec/yolo26.md "Pre- and post-processing"): scale to fit imgsz keeping the
// aspect ratio, bilinear resize bit-exact with OpenCV's INTER_LINEAR for 8-bit images, pad with 114 around
// the centre; then NCHW float RGB / 255 for the network, and the inverse mapping of boxes back to the
// original image.
#pragma once
#include <cstdint>
#include <vector>

#include "kernels/preprocess/letterbox_resize_params.cuh"
#include "pipeline/image/image.hpp"

namespace lab {

constexpr uint8_t kLetterboxPad = 114;  // the padding byte (Ultralytics' grey)

struct LetterboxGeometry {
  int source_width = 0, source_height = 0;
  double ratio = 1;                           // r = min(imgsz / h, imgsz / w)
  int resized_width = 0, resized_height = 0;  // round(w * r), round(h * r) (round half to even, as Python)
  int width = 0, height = 0;                  // the letterboxed (network input) size
  int left = 0, top = 0;                      // padding before the image; right/bottom padding fill the rest
};

// `rect` (Ultralytics auto=True): the padding is reduced modulo `stride`, so the result is the smallest
// rectangle of multiples of `stride` around the resized image; otherwise the result is imgsz x imgsz.
LetterboxGeometry letterbox_geometry(int width, int height, int imgsz, bool rect, int stride = 32);

// OpenCV cv::resize(src, (width, height), INTER_LINEAR) for 3-channel 8-bit images, bit for bit: half-pixel
// centres, 11-bit fixed-point weights, border rows/columns clamped.
Image resize_bilinear(const Image& source, int width, int height);

// The taps of that resize along one axis, `source_size` -> `target_size` pixels: `columns` (OpenCV clamps the
// sample position at the borders) or rows (it clamps the two row indices instead). The device letterbox
// (letterbox_resize) runs on these very tables.
std::vector<LetterboxTap> resize_taps(int source_size, int target_size, bool columns);

// Resize + pad (114) to geometry.width x geometry.height.
Image letterbox(const Image& source, const LetterboxGeometry& geometry);

// Appends the image as planar float R, G, B planes of value / 255 (one [3, H, W] item of an NCHW batch).
void append_nchw(const Image& image, std::vector<float>& out);
// The same planes written to `out` (3 x height x width floats).
void write_nchw(const Image& image, float* out);

// letterbox() then append_nchw() in one pass, written to `out` (3 x geometry.height x geometry.width floats,
// e.g. a staging slot): the same values without the intermediate images.
void letterbox_into_nchw(const Image& source, const LetterboxGeometry& geometry, float* out);

struct Box {
  float x1 = 0, y1 = 0, x2 = 0, y2 = 0;
};

// Ultralytics scale_boxes + clip_boxes: a box in the letterboxed frame back to source pixels (gain and
// padding recomputed from the two shapes, as Ultralytics does), clipped to [0, w] x [0, h].
Box scale_box_to_source(const Box& box, const LetterboxGeometry& geometry);

}  // namespace lab
