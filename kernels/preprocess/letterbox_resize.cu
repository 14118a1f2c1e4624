// letterbox_resize: the detector's whole pre-processing on the device. A source RGB8 image -> OpenCV's
// INTER_LINEAR resize (bit for bit: the host's tap tables, the same fixed-point arithmetic) -> centred in a
// letterbox of padding -> planar float RGB / 255: pipeline/image/letterbox.cpp's letterbox_into_nchw.
//
// Layout (LetterboxResizeParams): image [src_h, src_w, 3] bytes; columns [resized_w] and rows [resized_h]
// taps; out [3, dst_h, dst_w] floats. Inside the resized area (x - left, y - top) blends two source pixels of
// two source rows:
//   s_k = image[row.index_k, col.index0, c] * col.weight0 + image[row.index_k, col.index1, c] * col.weight1
//   v   = min(255, ((((s_0 >> 4) * row.weight0) >> 16) + (((s_1 >> 4) * row.weight1) >> 16) + 2) >> 2)
// (OpenCV's horizontal pass, then its vectorised vertical pass VResizeLinearVec_32s8u); outside it, v = pad.
// out = v / 255.
// Grid: (ceil(dst_h * dst_w / blockDim.x)); block: any multiple of 32. One thread per output pixel, one image
// per launch (images of a batch may come from sources of different sizes); each plane's stores coalesce.
// Variants: letterbox_resize_v1_pixel (the only one; it reads at most 12 bytes and writes 12 per pixel).
#include "common/lab.cuh"
#include "preprocess/letterbox_resize_params.cuh"

__global__ void letterbox_resize_v1_pixel(const lab::LetterboxResizeParams p) {
  const int plane = p.dst_h * p.dst_w;
  const int pixel = blockIdx.x * blockDim.x + threadIdx.x;
  if (pixel >= plane) return;
  const int y = pixel / p.dst_w - p.top, x = pixel % p.dst_w - p.left;
  int value[3] = {p.pad, p.pad, p.pad};
  if (y >= 0 && y < p.resized_h && x >= 0 && x < p.resized_w) {
    const lab::LetterboxTap column = p.columns[x], row = p.rows[y];
    const unsigned char* row0 = p.image + size_t(row.index0) * size_t(p.src_w) * 3;
    const unsigned char* row1 = p.image + size_t(row.index1) * size_t(p.src_w) * 3;
    const int left = column.index0 * 3, right = column.index1 * 3;
    for (int c = 0; c < 3; ++c) {
      const int s0 = row0[left + c] * column.weight0 + row0[right + c] * column.weight1;
      const int s1 = row1[left + c] * column.weight0 + row1[right + c] * column.weight1;
      const int v = ((((s0 >> 4) * row.weight0) >> 16) + (((s1 >> 4) * row.weight1) >> 16) + 2) >> 2;
      value[c] = v > 255 ? 255 : v;
    }
  }
  float* out = p.out + pixel;
  out[0] = float(value[0]) / 255.0f;
  out[plane] = float(value[1]) / 255.0f;
  out[2 * size_t(plane)] = float(value[2]) / 255.0f;
}
