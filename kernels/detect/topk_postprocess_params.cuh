// Parameters of the top-k post-process kernels (topk_postprocess.cu), shared by the kernels and the host that
// launches them: plain data, passed by value.
#pragma once

namespace lab {

struct TopkAnchorKeysParams {
  const float* logits;  // [B, nc, A]
  unsigned* keys;       // [B, A]: the best ranking key of each anchor
  int anchors;          // A
  int classes;          // nc
};

struct TopkSelectParams {
  const float* boxes;           // [B, 4, A]: cx, cy, w, h in pixels
  const float* logits;          // [B, nc, A]
  const unsigned* anchor_keys;  // [B, A], from topk_anchor_keys
  unsigned* pair_keys;          // [B, K * nc], scratch
  float* out;                   // [B, K, 6]: x1, y1, x2, y2, score, class
  int anchors;                  // A
  int classes;                  // nc
  int k;                        // K = min(max_det, A) <= 1024
};

}  // namespace lab
