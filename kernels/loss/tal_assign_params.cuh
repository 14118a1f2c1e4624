// Parameters of the task-aligned assignment kernels (tal_assign.cu), shared by the kernels and the host that
// launches them: plain data, passed by value. One struct serves the six launches of an assignment; each
// kernel reads the fields its step needs. B images, A anchors, G = the largest gt count of the batch.
#pragma once

namespace lab {

// One ground-truth box in network-input pixels (the float64 of the host assigner) and its class.
struct TalGt {
  double x1, y1, x2, y2;
  int cls;
  int unused;  // padding to 8 bytes, zero
};

struct TalAssignParams {
  // Inputs.
  const float* boxes;          // [B, 4, A]: raw l, t, r, b in grid units of the anchor's level
  const float* logits;         // [B, nc, A]
  const float* anchor_x;       // [A], grid units
  const float* anchor_y;       // [A]
  const float* anchor_stride;  // [A]
  const TalGt* gts;            // [B, G]; rows past gt_count[b] are not read
  const int* gt_count;         // [B]
  // Workspace, written and read by the steps in launch order.
  double* overlap;         // [B, G, A]: clamped CIoU(gt, pred) of candidates, 0 elsewhere
  double* align;           // [B, G, A]: score^alpha * overlap^beta of candidates, 0 elsewhere
  int* claim_count;        // [B, A]: gts whose top-k holds the anchor
  int* claim_first;        // [B, A]: the lowest such gt (meaningful when claim_count is 1)
  int* owner;              // [B, A]: gt after conflict resolution, -1 for none
  int* kept;               // [B, G, TOPK_MAX]: the top-k2 anchors of each gt (-1 padded; when topk2 != topk)
  double* gt_max_align;    // [B, G]: over the gt's final positives
  double* gt_max_overlap;  // [B, G]
  // Outputs.
  int* gt_of_anchor;     // [B, A]: assigned gt, -1 for background
  double* target_score;  // [B, A]: align * max_overlap_of_gt / (max_align_of_gt + eps), 0 for background
  double* target_score_sum;  // [1]: the sum of target_score
  int batch, anchors, classes, max_gts;
  int topk, topk2;
  double alpha, beta, eps, small_side, widened_side;
};

}  // namespace lab
