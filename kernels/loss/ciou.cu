// ciou: the CIoU box loss of YOLO26 (Ultralytics bbox_iou(..., CIoU=True), eps = 1e-7), forward and backward.
//
// Layout (CiouForwardParams, CiouBackwardParams): pred, target [4, N] row-major, rows cx, cy, w, h (centre
// form, any unit); loss, iou, v, alpha [N]; dy [N] (upstream gradient of each anchor's loss); d_pred [4, N] in
// the same XYWH rows as pred.
// Each box is converted to corners (x1 = cx - w/2, x2 = cx + w/2, ...), then, per anchor:
//   w1 = x2 - x1, h1 = y2 - y1 + eps (same for the target; evaluated as w1 = w, h1 = h + eps, equal in real
//   arithmetic and free of the float32 rounding of the corners, which would cost ~1e-3 relative in v on
//   small boxes far from the origin)
//   inter = clamp(min(x2) - max(x1), 0) * clamp(min(y2) - max(y1), 0)
//   union = w1*h1 + w2*h2 - inter + eps,  iou = inter / union
//   cw = max(x2) - min(x1), ch = max(y2) - min(y1),  c2 = cw^2 + ch^2 + eps
//   rho2 = ((X1 + X2 - x1 - x2)^2 + (Y1 + Y2 - y1 - y2)^2) / 4
//   v = 4/pi^2 * (atan(w2/h2) - atan(w1/h1))^2,  alpha = v / (v - iou + (1 + eps))
//   loss = 1 - (iou - (rho2/c2 + v*alpha))
// Saved for backward (the saved-activation pattern): iou, v, alpha; backward recomputes only the cheap
// corner geometry, never the saved values (nor the two atans: the angle gap is sqrt(v / (4/pi^2)), signed).
//
// Backward: d_pred = dy * d loss / d pred (targets get no gradient).
//   FULL_ALPHA_GRAD = false: alpha is a constant (Ultralytics computes it under torch.no_grad), so
//     d loss = -d iou + d(rho2/c2) + alpha * d v.
//   FULL_ALPHA_GRAD = true: the full derivative through alpha(v, iou), which works out to
//     d loss = -(1 - alpha^2) d iou + d(rho2/c2) + alpha (2 - alpha) d v.
// Tie convention: every min, every max and the clamp at 0 (a max against 0) that sees two equal operands
// passes half of the gradient to each operand (PyTorch's rule for torch.minimum / torch.maximum). For a
// single tie this equals the mean of the one-sided derivatives, which is what central differences measure.
//
// Grid: ceil(N / BLOCK_N) CTAs of BLOCK_N threads (one CTA per BLOCK_N-wide anchor tile, one thread per
// anchor, any N). Every row load and store of a warp is coalesced over consecutive anchors; no shared memory.
// Variants: ciou_forward<BLOCK_N>; ciou_backward<BLOCK_N, FULL_ALPHA_GRAD> (constant or differentiated
// alpha).
#include "common/lab.cuh"
#include "loss/ciou_params.cuh"

#define LAB_CIOU_EPS 1e-7f
#define LAB_FOUR_OVER_PI_SQUARED 0.405284734569351f

// One box in corner form plus the eps-adjusted width and height of the spec formula.
struct CiouCorners {
  float x1, y1, x2, y2, w, h;
};

__device__ __forceinline__ CiouCorners ciou_corners(const float* boxes, int n, int i) {
  const float cx = boxes[i], cy = boxes[n + i], w = boxes[2 * n + i], h = boxes[3 * n + i];
  CiouCorners c;
  c.x1 = cx - 0.5f * w;
  c.x2 = cx + 0.5f * w;
  c.y1 = cy - 0.5f * h;
  c.y2 = cy + 0.5f * h;
  c.w = w;  // = x2 - x1 exactly in real arithmetic, without the float32 rounding of the corners
  c.h = h + LAB_CIOU_EPS;
  return c;
}

// Share of the gradient of min(a, b) that flows to `a` (1, 0, or 1/2 on a tie); for max(a, b) use (b, a).
__device__ __forceinline__ float ciou_min_share(float a, float b) {
  return a < b ? 1.0f : (a == b ? 0.5f : 0.0f);
}

template <int BLOCK_N>
__global__ void ciou_forward(const lab::CiouForwardParams params) {
  const float* __restrict__ pred = params.pred;
  const float* __restrict__ target = params.target;
  float* __restrict__ loss = params.loss;
  float* __restrict__ iou_out = params.iou;
  float* __restrict__ v_out = params.v;
  float* __restrict__ alpha_out = params.alpha;
  const int n = params.n;
  const int i = blockIdx.x * BLOCK_N + threadIdx.x;
  if (i >= n) return;
  const CiouCorners p = ciou_corners(pred, n, i);
  const CiouCorners t = ciou_corners(target, n, i);

  const float iw = fmaxf(fminf(p.x2, t.x2) - fmaxf(p.x1, t.x1), 0.0f);
  const float ih = fmaxf(fminf(p.y2, t.y2) - fmaxf(p.y1, t.y1), 0.0f);
  const float inter = iw * ih;
  const float uni = p.w * p.h + t.w * t.h - inter + LAB_CIOU_EPS;
  const float iou = inter / uni;

  const float cw = fmaxf(p.x2, t.x2) - fminf(p.x1, t.x1);
  const float ch = fmaxf(p.y2, t.y2) - fminf(p.y1, t.y1);
  const float c2 = cw * cw + ch * ch + LAB_CIOU_EPS;
  const float dx = t.x1 + t.x2 - p.x1 - p.x2, dy = t.y1 + t.y2 - p.y1 - p.y2;
  const float rho2 = 0.25f * (dx * dx + dy * dy);

  const float angle_gap = atanf(t.w / t.h) - atanf(p.w / p.h);
  const float v = LAB_FOUR_OVER_PI_SQUARED * angle_gap * angle_gap;
  const float alpha = v / (v - iou + (1.0f + LAB_CIOU_EPS));

  loss[i] = 1.0f - (iou - (rho2 / c2 + v * alpha));
  iou_out[i] = iou;
  v_out[i] = v;
  alpha_out[i] = alpha;
}

template <int BLOCK_N, bool FULL_ALPHA_GRAD>
__global__ void ciou_backward(const lab::CiouBackwardParams params) {
  const float* __restrict__ pred = params.pred;
  const float* __restrict__ target = params.target;
  const float* __restrict__ iou_saved = params.iou;
  const float* __restrict__ v_saved = params.v;
  const float* __restrict__ alpha_saved = params.alpha;
  const float* __restrict__ dy = params.dy;
  float* __restrict__ d_pred = params.d_pred;
  const int n = params.n;
  const int i = blockIdx.x * BLOCK_N + threadIdx.x;
  if (i >= n) return;
  const CiouCorners p = ciou_corners(pred, n, i);
  const CiouCorners t = ciou_corners(target, n, i);
  const float iou = iou_saved[i], alpha = alpha_saved[i];

  // Coefficients of d iou and d v in d loss (see the header); the rho2/c2 term always has coefficient 1.
  const float g_iou = FULL_ALPHA_GRAD ? alpha * alpha - 1.0f : -1.0f;
  const float g_v = FULL_ALPHA_GRAD ? alpha * (2.0f - alpha) : alpha;

  // Gradients w.r.t. the pred corners and w.r.t. the pred w1, h1.
  float g_x1 = 0.0f, g_x2 = 0.0f, g_y1 = 0.0f, g_y2 = 0.0f, g_w = 0.0f, g_h = 0.0f;

  // iou = inter / union: d iou = (1 + iou) / union * d inter - iou / union * d(w1 * h1).
  const float iw_raw = fminf(p.x2, t.x2) - fmaxf(p.x1, t.x1);
  const float ih_raw = fminf(p.y2, t.y2) - fmaxf(p.y1, t.y1);
  const float iw = fmaxf(iw_raw, 0.0f), ih = fmaxf(ih_raw, 0.0f);
  const float uni = p.w * p.h + t.w * t.h - iw * ih + LAB_CIOU_EPS;
  const float g_inter = g_iou * (1.0f + iou) / uni;
  const float g_area = -g_iou * iou / uni;
  g_w += g_area * p.h;
  g_h += g_area * p.w;
  const float g_iw = g_inter * ih * ciou_min_share(0.0f, iw_raw);  // clamp = max(iw_raw, 0)
  const float g_ih = g_inter * iw * ciou_min_share(0.0f, ih_raw);
  g_x2 += g_iw * ciou_min_share(p.x2, t.x2);
  g_x1 -= g_iw * ciou_min_share(t.x1, p.x1);
  g_y2 += g_ih * ciou_min_share(p.y2, t.y2);
  g_y1 -= g_ih * ciou_min_share(t.y1, p.y1);

  // rho2 / c2: d = d rho2 / c2 - rho2 / c2^2 * d c2.
  const float cw = fmaxf(p.x2, t.x2) - fminf(p.x1, t.x1);
  const float ch = fmaxf(p.y2, t.y2) - fminf(p.y1, t.y1);
  const float c2 = cw * cw + ch * ch + LAB_CIOU_EPS;
  const float dx = t.x1 + t.x2 - p.x1 - p.x2, dyc = t.y1 + t.y2 - p.y1 - p.y2;
  const float rho2 = 0.25f * (dx * dx + dyc * dyc);
  const float inv_c2 = 1.0f / c2;
  const float g_c2 = -rho2 * inv_c2 * inv_c2;
  g_x1 -= 0.5f * dx * inv_c2;  // d rho2 / d x1 = d rho2 / d x2 = -dx / 2
  g_x2 -= 0.5f * dx * inv_c2;
  g_y1 -= 0.5f * dyc * inv_c2;
  g_y2 -= 0.5f * dyc * inv_c2;
  const float g_cw = g_c2 * 2.0f * cw, g_ch = g_c2 * 2.0f * ch;
  g_x2 += g_cw * ciou_min_share(t.x2, p.x2);
  g_x1 -= g_cw * ciou_min_share(p.x1, t.x1);
  g_y2 += g_ch * ciou_min_share(t.y2, p.y2);
  g_y1 -= g_ch * ciou_min_share(p.y1, t.y1);

  // v = 4/pi^2 (atan(w2/h2) - atan(w1/h1))^2; d atan(w/h) = (h dw - w dh) / (w^2 + h^2).
  // The gap atan(w2/h2) - atan(w1/h1) comes from the saved v; atan is increasing, so its sign is that of
  // w2/h2 - w1/h1.
  const float angle_gap = copysignf(sqrtf(v_saved[i] / LAB_FOUR_OVER_PI_SQUARED), t.w / t.h - p.w / p.h);
  const float g_angle = -g_v * 2.0f * LAB_FOUR_OVER_PI_SQUARED * angle_gap / (p.w * p.w + p.h * p.h);
  g_w += g_angle * p.h;
  g_h -= g_angle * p.w;

  // Corners x1,2 = cx -+ w/2 (same for y); w1 = w and h1 = h + eps feed d w and d h directly. (Routing them
  // through the corners instead would add +g_w and -g_w into d cx, which cancels catastrophically when g_w is
  // huge, e.g. ~1e6 for a point pred whose h1 is eps.)
  const float scale = dy[i];
  d_pred[i] = scale * (g_x1 + g_x2);
  d_pred[n + i] = scale * (g_y1 + g_y2);
  d_pred[2 * n + i] = scale * (0.5f * (g_x2 - g_x1) + g_w);
  d_pred[3 * n + i] = scale * (0.5f * (g_y2 - g_y1) + g_h);
}
