// detect_decode: raw LTRB box distances + the precomputed anchor grid -> decoded boxes, one fused pass.
//
// Layout (DetectDecodeParams): raw [B, 4, A] (rows l, t, r, b in grid units, row-major contiguous); anchor_x,
// anchor_y, strides [A] (anchor centres in grid units, i.e. cell x + 0.5, and the level stride of each
// anchor); out [B, 4, A] with rows cx, cy, w, h in input pixels:
//   cx = (ax + (r - l) / 2) * s,  cy = (ay + (b - t) / 2) * s,  w = (l + r) * s,  h = (t + b) * s.
// Grid: (ceil(A / blockDim.x), B); block: any multiple of 32. One thread per anchor: the four loads and four
// stores of a warp are each coalesced over consecutive anchors. Saves nothing (inference only).
// Variants: detect_decode_v1_fused (the only one; it is memory bound at ~32 bytes per anchor).
#include "common/lab.cuh"
#include "detect/detect_decode_params.cuh"

__global__ void detect_decode_v1_fused(const lab::DetectDecodeParams p) {
  const float* __restrict__ raw = p.raw;
  const float* __restrict__ anchor_x = p.anchor_x;
  const float* __restrict__ anchor_y = p.anchor_y;
  const float* __restrict__ strides = p.strides;
  float* __restrict__ out = p.out;
  const int anchors = p.anchors;
  const int a = blockIdx.x * blockDim.x + threadIdx.x;
  if (a >= anchors) return;
  const size_t base = size_t(blockIdx.y) * 4 * anchors + a;
  const float l = raw[base], t = raw[base + anchors];
  const float r = raw[base + 2 * size_t(anchors)], b = raw[base + 3 * size_t(anchors)];
  const float s = strides[a];
  out[base] = (anchor_x[a] + 0.5f * (r - l)) * s;
  out[base + anchors] = (anchor_y[a] + 0.5f * (b - t)) * s;
  out[base + 2 * size_t(anchors)] = (l + r) * s;
  out[base + 3 * size_t(anchors)] = (t + b) * s;
}
