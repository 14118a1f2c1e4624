// topk_postprocess: the end-to-end post-process of YOLO26 (no NMS): per image, the K = min(max_det, A) best
// anchors by their best class, then the K best (anchor, class) pairs among those K * nc, sorted by score.
//
// Layouts (TopkAnchorKeysParams, TopkSelectParams): boxes [B, 4, A] rows cx, cy, w, h in pixels
// (detect_decode's output); logits [B, nc, A]; out [B, K, 6] rows x1, y1, x2, y2, score = sigmoid(logit)
// (float32), class (as float). Scratch: anchor_keys [B, A] and pair_keys [B, K * nc] (uint32).
// Order: the ranking key of a logit is its IEEE bits mapped to an order-preserving uint32 (sigmoid is
// monotone, so this is the score order; it stays exact on every backend whatever the last bit of expf).
// Stage 1 ranks anchors by the max key over classes, ties to the lower anchor index; stage 2 ranks the pairs
// (rank r of stage 1, class c) by key, ties to the lower flat index r * nc + c. Every element gets the
// composite 64-bit key (key << 32) | (0xffffffff - index), all distinct, sorted descending.
// Kernels (variant v1_radix_bitonic):
//   topk_anchor_keys  one thread per anchor: max key over classes (coalesced over anchors). Block 256, grid
//                     (ceil(A / 256), B).
//   topk_select       one CTA of 1024 threads per image. For each stage: radix-select the K-th largest
//                     composite key (8-bit digits from the top, a 256-bin shared histogram per pass, a warp
//                     scan to pick the digit, early exit once the digit's bin holds exactly the remaining
//                     count), gather the K keys >= it into shared slots, bitonic-sort the next power of two
//                     slots (<= 1024) descending. Stage 2 first writes its K * nc keys to pair_keys. Grid
//                     (B).
#include "common/lab.cuh"
#include "detect/topk_postprocess_params.cuh"

namespace topk {

constexpr int kThreads = 1024;  // topk_select block size
constexpr int kSlots = 1024;    // largest K
constexpr unsigned kNone = 0xffffffffu;

// IEEE float bits -> uint32 in the same order (negative floats reversed below the positive ones).
__device__ __forceinline__ unsigned ordered_key(float x) {
  const unsigned u = __float_as_uint(x);
  return (u & 0x80000000u) ? ~u : (u | 0x80000000u);
}

__device__ __forceinline__ unsigned long long composite(unsigned key, unsigned index) {
  return ((unsigned long long)key << 32) | (kNone - index);
}

__device__ __forceinline__ unsigned composite_index(unsigned long long c) {
  return kNone - unsigned(c);
}

struct SelectState {
  unsigned digit;
  unsigned above;  // elements of the current prefix with a larger digit
  int exact;       // the digit's bin holds exactly the count still needed
  int gathered;
};

// slots[0, k) = the k largest composites of keys[0, n) (index = position), sorted descending.
__device__ void select_sorted(const unsigned* keys, int n, int k, unsigned* hist, unsigned long long* slots,
                              SelectState* state) {
  const int tid = threadIdx.x;
  unsigned long long prefix = 0, mask = 0;
  unsigned need = unsigned(k);
  for (int shift = 56; shift >= 0; shift -= 8) {
    for (int i = tid; i < 256; i += kThreads) hist[i] = 0;
    __syncthreads();
    for (int i = tid; i < n; i += kThreads) {
      const unsigned long long c = composite(keys[i], unsigned(i));
      if ((c & mask) == prefix) atomicAdd(&hist[unsigned(c >> shift) & 255u], 1u);
    }
    __syncthreads();
    if (tid < 32) {  // lane l scans bins 255 - 8l .. 248 - 8l (from the largest digit down)
      unsigned bins[8], sum = 0;
#pragma unroll
      for (int j = 0; j < 8; ++j) sum += bins[j] = hist[255 - (tid * 8 + j)];
      unsigned inclusive = sum;
      for (int offset = 1; offset < 32; offset <<= 1) {
        const unsigned t = __shfl_up_sync(LAB_FULL_MASK, inclusive, offset);
        if (tid >= offset) inclusive += t;
      }
      unsigned cum = inclusive - sum;
      if (cum < need && inclusive >= need) {
        for (int j = 0; j < 8; ++j) {
          if (cum + bins[j] >= need) {
            state->digit = 255u - unsigned(tid * 8 + j);
            state->above = cum;
            state->exact = cum + bins[j] == need;
            break;
          }
          cum += bins[j];
        }
      }
    }
    __syncthreads();
    prefix |= (unsigned long long)state->digit << shift;
    mask |= 255ull << shift;
    need -= state->above;
    if (state->exact) break;  // every element of the prefix is in: the threshold is the prefix itself
  }
  // prefix is now a threshold with exactly k composites >= it.
  if (tid == 0) state->gathered = 0;
  int padded = 1;
  while (padded < k) padded <<= 1;
  for (int i = tid; i < padded; i += kThreads) slots[i] = 0;  // 0 is below every real composite
  __syncthreads();
  for (int i = tid; i < n; i += kThreads) {
    const unsigned long long c = composite(keys[i], unsigned(i));
    if (c >= prefix) slots[atomicAdd(&state->gathered, 1)] = c;
  }
  __syncthreads();
  for (int size = 2; size <= padded; size <<= 1)
    for (int stride = size / 2; stride > 0; stride >>= 1) {
      for (int i = tid; i < padded; i += kThreads) {
        const int j = i ^ stride;
        if (j > i) {
          const unsigned long long a = slots[i], b = slots[j];
          if ((a < b) == ((i & size) == 0)) slots[i] = b, slots[j] = a;
        }
      }
      __syncthreads();
    }
}

}  // namespace topk

__global__ void __launch_bounds__(256) topk_anchor_keys(const lab::TopkAnchorKeysParams p) {
  const float* __restrict__ logits = p.logits;
  unsigned* __restrict__ keys = p.keys;
  const int anchors = p.anchors, classes = p.classes;
  const int a = blockIdx.x * blockDim.x + threadIdx.x;
  if (a >= anchors) return;
  const float* column = logits + (size_t)blockIdx.y * classes * anchors + a;
  unsigned best = 0;
  for (int c = 0; c < classes; ++c) best = max(best, topk::ordered_key(column[(size_t)c * anchors]));
  keys[(size_t)blockIdx.y * anchors + a] = best;
}

__global__ void __launch_bounds__(topk::kThreads) topk_select(const lab::TopkSelectParams p) {
  const float* __restrict__ boxes = p.boxes;
  const float* __restrict__ logits = p.logits;
  const unsigned* __restrict__ anchor_keys = p.anchor_keys;
  unsigned* pair_keys = p.pair_keys;
  float* __restrict__ out = p.out;
  const int anchors = p.anchors, classes = p.classes, k = p.k;
  __shared__ unsigned hist[256];
  __shared__ unsigned long long slots[topk::kSlots];
  __shared__ unsigned best_anchor[topk::kSlots];
  __shared__ topk::SelectState state;
  const int b = blockIdx.x, tid = threadIdx.x;
  const float* logits_b = logits + (size_t)b * classes * anchors;

  topk::select_sorted(anchor_keys + (size_t)b * anchors, anchors, k, hist, slots, &state);
  for (int r = tid; r < k; r += topk::kThreads) best_anchor[r] = topk::composite_index(slots[r]);
  __syncthreads();

  unsigned* pairs = pair_keys + (size_t)b * k * classes;
  for (int j = tid; j < k * classes; j += topk::kThreads)
    pairs[j] = topk::ordered_key(logits_b[(size_t)(j % classes) * anchors + best_anchor[j / classes]]);
  __syncthreads();  // the block's global writes are visible to the whole block after the barrier
  topk::select_sorted(pairs, k * classes, k, hist, slots, &state);

  const float* boxes_b = boxes + (size_t)b * 4 * anchors;
  for (int r = tid; r < k; r += topk::kThreads) {
    const unsigned flat = topk::composite_index(slots[r]);
    const unsigned cls = flat % classes, anchor = best_anchor[flat / classes];
    const float logit = logits_b[(size_t)cls * anchors + anchor];
    const float cx = boxes_b[anchor], cy = boxes_b[anchors + anchor];
    const float w = boxes_b[2 * (size_t)anchors + anchor], h = boxes_b[3 * (size_t)anchors + anchor];
    float* row = out + ((size_t)b * k + r) * 6;
    row[0] = cx - 0.5f * w;
    row[1] = cy - 0.5f * h;
    row[2] = cx + 0.5f * w;
    row[3] = cy + 0.5f * h;
    row[4] = 1.0f / (1.0f + expf(-logit));
    row[5] = float(cls);
  }
}
