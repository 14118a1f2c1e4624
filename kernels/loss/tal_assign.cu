// tal_assign: the task-aligned assignment of YOLO26's loss (Ultralytics TaskAlignedAssigner, spec/yolo26.md)
// for a batch, on the device, in float64 like the host assigner it is checked against (host_assigner.hpp).
//
// Layout (TalAssignParams): boxes [B, 4, A] raw l, t, r, b; logits [B, nc, A]; anchors [A]; gts [B, G]
// padded, gt_count [B]. Outputs gt_of_anchor [B, A] (-1: background) and target_score [B, A].
//
// Six launches, in this order (each reads what the previous wrote):
//   tal_metrics<BLOCK_N>   grid (A tiles, max(G, 1), B), a thread per (anchor, gt): the candidate test
//   (anchor
//                          centre inside the gt box, STAL widening of sides < small_side to widened_side),
//                          then for candidates overlap = max(CIoU(gt, pred), 0) and
//                          align = sigmoid(logit of the gt's class)^alpha * overlap^beta; 0 for the others.
//                          Gt row 0 also resets the anchor's claim counters.
//   tal_topk<THREADS>      grid (max(G, 1), B), a CTA per gt: its top-k anchors by align among align > 0,
//                          each claimed with integer atomics (count, lowest claiming gt).
//   tal_resolve<BLOCK_N>   a thread per anchor: one claim -> that gt; several -> the gt of highest overlap
//                          among all gts of the image (the first on ties), which need not be a claimant.
//   tal_gt_stats<THREADS>  a CTA per gt: with topk2 != topk, its best topk2 owned anchors (the kept list);
//                          the largest align and overlap over its final positives.
//   tal_targets<BLOCK_N>   a thread per anchor: drops owned anchors outside their gt's kept list, writes the
//                          gt and the target score align * max_overlap / (max_align + eps).
//   tal_score_sum<THREADS> one CTA (1024 threads, whatever the per-gt steps' THREADS): the sum of the target
//                          scores of the batch (the loss's normaliser is max(sum, 1)), strided per thread,
//                          then a fixed tree (block_reduce.cuh).
// Ranking: higher align first, the lower anchor index on ties (as the host assigner). Deterministic: the
// top-k is a per-thread sorted list merged by k block-wide argmax rounds, and the only atomics are integer
// ones (count, min), whose result does not depend on their order; the sums and maxima are fixed trees.
#include "common/lab.cuh"
#include "loss/block_reduce.cuh"
#include "loss/tal_assign_params.cuh"

#define LAB_TAL_TOPK_MAX 16  // largest topk / topk2 (TalAssignOp checks it)
#define LAB_TAL_NO_ANCHOR 0x7fffffff

// An anchor in the top-k order.
struct TalRanked {
  double key;
  int anchor;
};

__device__ __forceinline__ bool tal_before(const TalRanked& x, const TalRanked& y) {
  return x.key > y.key || (x.key == y.key && x.anchor < y.anchor);
}

// CIoU of two xyxy boxes in float64, the host assigner's formula and order of operations (eps = 1e-7).
__device__ double tal_ciou(double ax1, double ay1, double ax2, double ay2, double bx1, double by1, double bx2,
                           double by2) {
  const double eps = 1e-7;
  const double w1 = ax2 - ax1, h1 = ay2 - ay1 + eps;
  const double w2 = bx2 - bx1, h2 = by2 - by1 + eps;
  const double inter =
      fmax(fmin(ax2, bx2) - fmax(ax1, bx1), 0.0) * fmax(fmin(ay2, by2) - fmax(ay1, by1), 0.0);
  const double iou = inter / (w1 * h1 + w2 * h2 - inter + eps);
  const double cw = fmax(ax2, bx2) - fmin(ax1, bx1);
  const double ch = fmax(ay2, by2) - fmin(ay1, by1);
  const double c2 = cw * cw + ch * ch + eps;
  const double dx = bx1 + bx2 - ax1 - ax2, dy = by1 + by2 - ay1 - ay2;
  const double rho2 = (dx * dx + dy * dy) / 4;
  const double dtheta = atan(w2 / h2) - atan(w1 / h1);
  const double pi = 3.141592653589793;
  const double v = 4 / (pi * pi) * dtheta * dtheta;
  const double alpha = v / (v - iou + (1 + eps));
  return iou - (rho2 / c2 + v * alpha);
}

// The k best (k <= LAB_TAL_TOPK_MAX) anchors of `row` among those `eligible` accepts, in rank order, into
// chosen[]; returns how many. Called by all THREADS threads of the CTA; `scratch` holds THREADS entries.
template <int THREADS, class Eligible>
__device__ int tal_block_topk(const double* row, int anchors, int k, Eligible eligible, TalRanked* scratch,
                              int* chosen) {
  TalRanked local[LAB_TAL_TOPK_MAX];  // this thread's best, sorted
  int held = 0;
  for (int a = threadIdx.x; a < anchors; a += THREADS) {
    if (!eligible(a)) continue;
    const TalRanked r{row[a], a};
    if (held == k && !tal_before(r, local[k - 1])) continue;
    int i = held < k ? held++ : k - 1;
    for (; i > 0 && tal_before(r, local[i - 1]); --i) local[i] = local[i - 1];
    local[i] = r;
  }
  int head = 0, count = 0;
  for (int round = 0; round < k; ++round) {
    scratch[threadIdx.x] = head < held ? local[head] : TalRanked{-1.0, LAB_TAL_NO_ANCHOR};
    __syncthreads();
    for (int stride = THREADS / 2; stride > 0; stride >>= 1) {
      if (int(threadIdx.x) < stride && tal_before(scratch[threadIdx.x + stride], scratch[threadIdx.x]))
        scratch[threadIdx.x] = scratch[threadIdx.x + stride];
      __syncthreads();
    }
    const TalRanked top = scratch[0];
    __syncthreads();
    if (top.anchor == LAB_TAL_NO_ANCHOR) break;
    if (head < held && local[head].anchor == top.anchor) ++head;
    if (threadIdx.x == 0) chosen[round] = top.anchor;
    count = round + 1;
  }
  __syncthreads();
  return count;
}

template <int BLOCK_N>
__global__ void tal_metrics(const lab::TalAssignParams p) {
  const int a = blockIdx.x * BLOCK_N + threadIdx.x, g = blockIdx.y, b = blockIdx.z;
  if (a >= p.anchors) return;
  const size_t ba = size_t(b) * p.anchors + a;
  if (g == 0) {
    p.claim_count[ba] = 0;
    p.claim_first[ba] = LAB_TAL_NO_ANCHOR;
  }
  if (g >= p.max_gts) return;
  double overlap = 0, align = 0;
  const lab::TalGt gt = p.gts[size_t(b) * p.max_gts + g];
  if (g < p.gt_count[b] && gt.x1 + gt.y1 + gt.x2 + gt.y2 > 0) {  // Ultralytics treats sum <= 0 as padding
    const double cx = (gt.x1 + gt.x2) / 2, cy = (gt.y1 + gt.y2) / 2;
    const double w = gt.x2 - gt.x1 < p.small_side ? p.widened_side : gt.x2 - gt.x1;
    const double h = gt.y2 - gt.y1 < p.small_side ? p.widened_side : gt.y2 - gt.y1;
    const double ax = p.anchor_x[a], ay = p.anchor_y[a], st = p.anchor_stride[a];
    const double px = ax * st, py = ay * st;
    const double inside =
        fmin(fmin(px - (cx - w / 2), py - (cy - h / 2)), fmin((cx + w / 2) - px, (cy + h / 2) - py));
    if (inside > p.eps) {
      const float* boxes = p.boxes + size_t(b) * 4 * p.anchors;
      const int n = p.anchors;
      overlap = fmax(tal_ciou(gt.x1, gt.y1, gt.x2, gt.y2, (ax - boxes[a]) * st, (ay - boxes[n + a]) * st,
                              (ax + boxes[2 * n + a]) * st, (ay + boxes[3 * n + a]) * st),
                     0.0);
      const double logit = p.logits[(size_t(b) * p.classes + gt.cls) * p.anchors + a];
      const double score = 1 / (1 + exp(-logit));
      align = pow(score, p.alpha) * pow(overlap, p.beta);
    }
  }
  const size_t at = (size_t(b) * p.max_gts + g) * p.anchors + a;
  p.overlap[at] = overlap;
  p.align[at] = align;
}

template <int THREADS>
__global__ void tal_topk(const lab::TalAssignParams p) {
  __shared__ TalRanked scratch[THREADS];
  __shared__ int chosen[LAB_TAL_TOPK_MAX];
  const int g = blockIdx.x, b = blockIdx.y;
  if (g >= p.gt_count[b]) return;
  const double* align = p.align + (size_t(b) * p.max_gts + g) * p.anchors;
  const int n = tal_block_topk<THREADS>(
      align, p.anchors, p.topk, [align](int a) { return align[a] > 0; }, scratch, chosen);
  if (int(threadIdx.x) < n) {
    const size_t ba = size_t(b) * p.anchors + chosen[threadIdx.x];
    atomicAdd(&p.claim_count[ba], 1);
    atomicMin(&p.claim_first[ba], g);
  }
}

template <int BLOCK_N>
__global__ void tal_resolve(const lab::TalAssignParams p) {
  const int a = blockIdx.x * BLOCK_N + threadIdx.x, b = blockIdx.y;
  if (a >= p.anchors) return;
  const size_t ba = size_t(b) * p.anchors + a;
  const int claims = p.claim_count[ba];
  int owner = claims == 1 ? p.claim_first[ba] : -1;
  if (claims > 1) {
    double best = -1;
    for (int g = 0; g < p.gt_count[b]; ++g) {
      const double overlap = p.overlap[(size_t(b) * p.max_gts + g) * p.anchors + a];
      if (overlap > best) best = overlap, owner = g;
    }
  }
  p.owner[ba] = owner;
}

template <int THREADS>
__global__ void tal_gt_stats(const lab::TalAssignParams p) {
  __shared__ TalRanked scratch[THREADS];
  __shared__ double reduce[THREADS];
  __shared__ int chosen[LAB_TAL_TOPK_MAX];
  const int g = blockIdx.x, b = blockIdx.y;
  if (g >= p.gt_count[b]) return;
  const size_t bg = size_t(b) * p.max_gts + g;
  const double* align = p.align + bg * p.anchors;
  const double* overlap = p.overlap + bg * p.anchors;
  const int* owner = p.owner + size_t(b) * p.anchors;
  double max_align = 0, max_overlap = 0;
  if (p.topk2 != p.topk) {
    const int n = tal_block_topk<THREADS>(
        align, p.anchors, p.topk2, [owner, g](int a) { return owner[a] == g; }, scratch, chosen);
    for (int i = 0; i < n; ++i) {
      max_align = fmax(max_align, align[chosen[i]]);
      max_overlap = fmax(max_overlap, overlap[chosen[i]]);
    }
    if (threadIdx.x < LAB_TAL_TOPK_MAX)
      p.kept[bg * LAB_TAL_TOPK_MAX + threadIdx.x] = int(threadIdx.x) < n ? chosen[threadIdx.x] : -1;
  } else {
    for (int a = threadIdx.x; a < p.anchors; a += THREADS) {
      if (owner[a] != g) continue;
      max_align = fmax(max_align, align[a]);
      max_overlap = fmax(max_overlap, overlap[a]);
    }
    max_align = lab_block_max<THREADS>(max_align, reduce);
    max_overlap = lab_block_max<THREADS>(max_overlap, reduce);
  }
  if (threadIdx.x == 0) {
    p.gt_max_align[bg] = max_align;
    p.gt_max_overlap[bg] = max_overlap;
  }
}

template <int BLOCK_N>
__global__ void tal_targets(const lab::TalAssignParams p) {
  const int a = blockIdx.x * BLOCK_N + threadIdx.x, b = blockIdx.y;
  if (a >= p.anchors) return;
  const size_t ba = size_t(b) * p.anchors + a;
  int g = p.owner[ba];
  if (g >= 0 && p.topk2 != p.topk) {
    bool kept = false;
    for (int i = 0; i < LAB_TAL_TOPK_MAX; ++i)
      kept |= p.kept[(size_t(b) * p.max_gts + g) * LAB_TAL_TOPK_MAX + i] == a;
    if (!kept) g = -1;
  }
  double score = 0;
  if (g >= 0) {
    const size_t bg = size_t(b) * p.max_gts + g;
    score = p.align[bg * p.anchors + a] * p.gt_max_overlap[bg] / (p.gt_max_align[bg] + p.eps);
  }
  p.gt_of_anchor[ba] = g;
  p.target_score[ba] = score;
}

template <int THREADS>
__global__ void tal_score_sum(const lab::TalAssignParams p) {
  __shared__ double reduce[THREADS];
  const size_t n = size_t(p.batch) * p.anchors;
  double sum = 0;
  for (size_t i = threadIdx.x; i < n; i += THREADS) sum += p.target_score[i];
  sum = lab_block_sum<THREADS>(sum, reduce);
  if (threadIdx.x == 0) p.target_score_sum[0] = sum;
}
