// head_loss: the terms of one head's YOLO26 loss over a batch, on the device, after tal_assign: the CIoU
// box term's inputs (ciou.cu runs the CIoU itself), the L1 distance term and the chain rule from the CIoU's
// XYWH gradient to the raw l, t, r, b distances, the classification BCE against the sparse soft targets, and
// the deterministic sums. spec/yolo26.md (Loss) and docs/loss.md give the formulas.
//
// Layout (HeadLossParams): boxes [B, 4, A], logits [B, nc, A], gt_of_anchor and target_score [B, A];
// pred_xywh, target_xywh, d_xywh [4, B*A] (the CIoU kernels' [4, N] with N = B*A, one column per anchor);
// terms [4, B*A]. Every anchor is written (background: zero gradients, zero terms, a unit box for the CIoU).
//
//   box_targets<BLOCK_N>  a thread per anchor (grid (A tiles, B)): pred and target boxes as XYWH in grid
//   units
//                         (float64 corners rounded once), box_dy = w / tss * box_gain * grad_scale.
//   box_terms<BLOCK_N>    a thread per anchor: the L1 term mean_k |pred_k - target_k| * stride / size_k (x
//   over
//                         the width, y over the height) and its sign gradient, plus the CIoU gradient through
//                         x1 = ax - l, y1 = ay - t, x2 = ax + r, y2 = ay + b (d/dl = -(dcx/2 - dw), d/dt =
//                         -(dcy/2 - dh), d/dr = dcx/2 + dw, d/db = dcy/2 + dh), in float64, stored as float.
//   cls_terms<BLOCK_N>    a thread per anchor walking its classes (coalesced rows): the stable BCE sum in
//                         float (as cls.cu) with target w at the assigned class, 0 elsewhere, and
//                         d_logits = cls_gain * grad_scale / tss * (sigmoid(x) - t).
//   row_sums<THREADS>     a CTA per term row: fixed per-thread strides, then a fixed tree (block_reduce.cuh),
//                         in float64 (deterministic).
// tss = max(score_sum, 1) is read on the device (tal_assign's target_score_sum): nothing crosses to the host
// until the sums.
#include "common/lab.cuh"
#include "loss/block_reduce.cuh"
#include "loss/head_loss_params.cuh"
#include "loss/tal_assign_params.cuh"

__device__ __forceinline__ double head_tss(const lab::HeadLossParams& p) {
  return fmax(p.score_sum[0], 1.0);
}

template <int BLOCK_N>
__global__ void box_targets(const lab::HeadLossParams p) {
  const int a = blockIdx.x * BLOCK_N + threadIdx.x, b = blockIdx.y;
  if (a >= p.anchors) return;
  const size_t i = size_t(b) * p.anchors + a, n = size_t(p.batch) * p.anchors;
  const int g = p.gt_of_anchor[i];
  double pred[4] = {0.5, 0.5, 1, 1}, target[4] = {0.5, 0.5, 1, 1};
  double dy = 0;
  if (g >= 0) {
    const float* boxes = p.boxes + size_t(b) * 4 * p.anchors + a;
    const double ax = p.anchor_x[a], ay = p.anchor_y[a], st = p.anchor_stride[a];
    const double px1 = ax - boxes[0], py1 = ay - boxes[p.anchors], px2 = ax + boxes[2 * p.anchors],
                 py2 = ay + boxes[3 * p.anchors];
    const lab::TalGt gt = p.gts[size_t(b) * p.max_gts + g];
    const double tx1 = gt.x1 / st, ty1 = gt.y1 / st, tx2 = gt.x2 / st, ty2 = gt.y2 / st;
    pred[0] = (px1 + px2) / 2, pred[1] = (py1 + py2) / 2, pred[2] = px2 - px1, pred[3] = py2 - py1;
    target[0] = (tx1 + tx2) / 2, target[1] = (ty1 + ty2) / 2, target[2] = tx2 - tx1, target[3] = ty2 - ty1;
    dy = p.target_score[i] / head_tss(p) * p.box_gain * p.grad_scale;
  }
  for (int k = 0; k < 4; ++k) {
    p.pred_xywh[k * n + i] = float(pred[k]);
    p.target_xywh[k * n + i] = float(target[k]);
  }
  p.box_dy[i] = float(dy);
}

template <int BLOCK_N>
__global__ void box_terms(const lab::HeadLossParams p) {
  const int a = blockIdx.x * BLOCK_N + threadIdx.x, b = blockIdx.y;
  if (a >= p.anchors) return;
  const size_t i = size_t(b) * p.anchors + a, n = size_t(p.batch) * p.anchors;
  float* d_boxes = p.d_boxes + size_t(b) * 4 * p.anchors + a;
  const int g = p.gt_of_anchor[i];
  if (g < 0) {
    for (int k = 0; k < 4; ++k) d_boxes[k * p.anchors] = 0.0f;
    p.terms[i] = p.terms[2 * n + i] = p.terms[3 * n + i] = 0;
    return;
  }
  const float* boxes = p.boxes + size_t(b) * 4 * p.anchors + a;
  const double ax = p.anchor_x[a], ay = p.anchor_y[a], st = p.anchor_stride[a];
  const lab::TalGt gt = p.gts[size_t(b) * p.max_gts + g];
  const double weight = p.target_score[i], tss = head_tss(p);
  const double pred_xyxy[4] = {ax - boxes[0], ay - boxes[p.anchors], ax + boxes[2 * p.anchors],
                               ay + boxes[3 * p.anchors]};
  const double target_xyxy[4] = {gt.x1 / st, gt.y1 / st, gt.x2 / st, gt.y2 / st};
  const double scale[4] = {st / p.image_width, st / p.image_height, st / p.image_width, st / p.image_height};
  const double pred[4] = {ax - pred_xyxy[0], ay - pred_xyxy[1], pred_xyxy[2] - ax, pred_xyxy[3] - ay};
  const double target[4] = {ax - target_xyxy[0], ay - target_xyxy[1], target_xyxy[2] - ax,
                            target_xyxy[3] - ay};
  double grad[4], mean_abs = 0;
  for (int k = 0; k < 4; ++k) {
    const double diff = (pred[k] - target[k]) * scale[k];
    mean_abs += fabs(diff) / 4;
    const double sign = double((diff > 0) - (diff < 0));
    grad[k] = sign * scale[k] / 4 * weight / tss * p.l1_gain * p.grad_scale;
  }
  const double dcx = p.d_xywh[i], dcy = p.d_xywh[n + i], dw = p.d_xywh[2 * n + i], dh = p.d_xywh[3 * n + i];
  grad[0] -= dcx / 2 - dw;
  grad[1] -= dcy / 2 - dh;
  grad[2] += dcx / 2 + dw;
  grad[3] += dcy / 2 + dh;
  for (int k = 0; k < 4; ++k) d_boxes[k * p.anchors] = float(grad[k]);
  p.terms[i] = double(p.ciou_loss[i]) * weight;
  p.terms[2 * n + i] = mean_abs * weight;
  p.terms[3 * n + i] = 1;
}

template <int BLOCK_N>
__global__ void cls_terms(const lab::HeadLossParams p) {
  const int a = blockIdx.x * BLOCK_N + threadIdx.x, b = blockIdx.y;
  if (a >= p.anchors) return;
  const size_t i = size_t(b) * p.anchors + a, n = size_t(p.batch) * p.anchors;
  const int g = p.gt_of_anchor[i];
  const int target_class = g >= 0 ? p.gts[size_t(b) * p.max_gts + g].cls : -1;
  const float target_score = float(p.target_score[i]);
  const float dy = float(p.cls_gain * p.grad_scale / head_tss(p));
  const float* logits = p.logits + size_t(b) * p.classes * p.anchors + a;
  float* d_logits = p.d_logits + size_t(b) * p.classes * p.anchors + a;
  float sum = 0.0f;
  for (int c = 0; c < p.classes; ++c) {
    const float x = logits[size_t(c) * p.anchors];
    const float t = c == target_class ? target_score : 0.0f;
    const float e = expf(-fabsf(x));  // sigmoid(|x|) = 1 / (1 + e), sigmoid(-|x|) = e / (1 + e)
    sum += fmaxf(x, 0.0f) - x * t + log1pf(e);
    const float sigmoid = x >= 0.0f ? 1.0f / (1.0f + e) : e / (1.0f + e);
    d_logits[size_t(c) * p.anchors] = dy * (sigmoid - t);
  }
  p.terms[n + i] = sum;
}

template <int THREADS>
__global__ void row_sums(const lab::RowSumParams p) {
  __shared__ double reduce[THREADS];
  const double* row = p.rows + size_t(blockIdx.x) * p.n;
  double sum = 0;
  for (int i = threadIdx.x; i < p.n; i += THREADS) sum += row[i];
  sum = lab_block_sum<THREADS>(sum, reduce);
  if (threadIdx.x == 0) p.sums[blockIdx.x] = sum;
}
