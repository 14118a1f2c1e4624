// Parameters of the per-head loss-term kernels (head_loss.cu), shared by the kernels and the host that
// launches them: plain data, passed by value. B images, A anchors, nc classes, G gts per image (padded).
#pragma once

namespace lab {

struct TalGt;  // tal_assign_params.cuh

struct HeadLossParams {
  const float* boxes;          // [B, 4, A]: raw l, t, r, b in grid units
  const float* logits;         // [B, nc, A]
  const float* anchor_x;       // [A], grid units
  const float* anchor_y;       // [A]
  const float* anchor_stride;  // [A]
  const TalGt* gts;            // [B, G]
  const int* gt_of_anchor;     // [B, A] (tal_assign): -1 for background
  const double* target_score;  // [B, A] (tal_assign)
  const double* score_sum;     // [1] (tal_assign): sum of the target scores; the normaliser is max(sum, 1)
  float* pred_xywh;            // [4, B*A] grid units (a unit box for background), the CIoU kernels' input
  float* target_xywh;          // [4, B*A]
  float* box_dy;               // [B*A]: d total / d (1 - CIoU) of each anchor (0 for background)
  const float* ciou_loss;      // [B*A]: 1 - CIoU (ciou_forward)
  const float* d_xywh;         // [4, B*A]: d total / d pred_xywh (ciou_backward)
  float* d_boxes;              // [B, 4, A]: d total / d raw distances (0 for background)
  float* d_logits;             // [B, nc, A]: d total / d logits
  double* terms;  // [4, B*A]: rows box (1 - CIoU) * w, cls (BCE sum), l1 (mean |diff|) * w, positive
  int batch, anchors, classes, max_gts;
  int image_width, image_height;  // network input, pixels
  double box_gain, cls_gain, l1_gain;
  double grad_scale;  // the head's weight in the total (batch size times the epoch weight)
};

struct RowSumParams {
  const double* rows;  // [gridDim.x, n]
  double* sums;        // [gridDim.x]
  int n;
};

}  // namespace lab
