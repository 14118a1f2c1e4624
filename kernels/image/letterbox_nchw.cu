// letterbox_nchw: the device half of the detector's pre-processing. Resized RGB8 images -> the padded
// network input, planar float RGB / 255 (pipeline/image/letterbox.cpp: letterbox() after its resize, then
// append_nchw()).
//
// Layout (LetterboxNchwParams): image [B, src_h, src_w, 3] bytes (HWC, row-major contiguous); out
// [B, 3, dst_h, dst_w] floats (NCHW). The image lands at (top, left); every other pixel is `pad`:
//   out[b, c, y, x] = image[b, y - top, x - left, c] / 255  inside,  pad / 255  outside.
// Grid: (ceil(dst_h * dst_w / blockDim.x), B); block: any multiple of 32. One thread per output pixel: it
// reads its pixel's three bytes and writes one float to each plane, so each plane's stores are coalesced.
// Uploading bytes instead of floats moves a quarter of the data over PCIe. Saves nothing (inference only).
// Variants: letterbox_nchw_v1_pixel (the only one; it is memory bound at ~15 bytes per pixel).
#include "common/lab.cuh"
#include "image/letterbox_nchw_params.cuh"

__global__ void letterbox_nchw_v1_pixel(const lab::LetterboxNchwParams p) {
  const int plane = p.dst_h * p.dst_w;
  const int pixel = blockIdx.x * blockDim.x + threadIdx.x;
  if (pixel >= plane) return;
  const int y = pixel / p.dst_w - p.top, x = pixel % p.dst_w - p.left;
  int r = p.pad, g = p.pad, b = p.pad;
  if (y >= 0 && y < p.src_h && x >= 0 && x < p.src_w) {
    const unsigned char* rgb = p.image + ((size_t(blockIdx.y) * p.src_h + y) * p.src_w + x) * 3;
    r = rgb[0], g = rgb[1], b = rgb[2];
  }
  float* out = p.out + size_t(blockIdx.y) * 3 * plane + pixel;
  out[0] = float(r) / 255.0f;
  out[plane] = float(g) / 255.0f;
  out[2 * size_t(plane)] = float(b) / 255.0f;
}
