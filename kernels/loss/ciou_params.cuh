// Parameters of the CIoU loss kernels (ciou.cu), shared by the kernels and the host that launches them: plain
// data, passed by value. Boxes are [4, N] row-major, rows cx, cy, w, h.
#pragma once

namespace lab {

struct CiouForwardParams {
  const float* pred;    // [4, N]
  const float* target;  // [4, N]
  float* loss;          // [N]: 1 - CIoU
  float* iou;           // [N], saved for the backward
  float* v;             // [N], saved
  float* alpha;         // [N], saved
  int n;                // N
};

struct CiouBackwardParams {
  const float* pred;    // [4, N]
  const float* target;  // [4, N]
  const float* iou;     // [N], saved by the forward
  const float* v;       // [N], saved
  const float* alpha;   // [N], saved
  const float* dy;      // [N]: upstream gradient of each anchor's loss
  float* d_pred;        // [4, N], rows d cx, d cy, d w, d h
  int n;                // N
};

}  // namespace lab
