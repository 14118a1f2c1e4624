// cls: the classification loss of YOLO26, binary cross-entropy with logits against soft targets, summed over
// classes per anchor (the loss divides the total by the target-score sum afterwards), forward and backward.
//
// Layout (ClsForwardParams, ClsBackwardParams): logits, targets [C, N] row-major (class-major: row c holds
// class c of every anchor); loss [N]; dy [N] (upstream gradient of each anchor's loss); d_logits [C, N].
//   loss[n] = sum_c max(x, 0) - x * t + log1p(exp(-|x|))      (x = logits[c, n], t = targets[c, n])
//   d_logits[c, n] = dy[n] * (sigmoid(x) - t)
// Both forms are stable for any |x|: exp only ever sees -|x|.
//
// Grid: cls_forward<BLOCK_N>: ceil(N / BLOCK_N) CTAs of BLOCK_N threads, one thread per anchor walking its C
// classes (each step of the walk is a coalesced row load of the warp; the terms are all >= 0 for t in [0, 1],
// so float accumulation stays within about C * 2^-24 relative error). cls_backward<BLOCK_N>: (ceil(N /
// BLOCK_N), C) CTAs of BLOCK_N threads, one thread per element. Saves nothing: backward recomputes sigmoid
// from the logits. Variants: the single thread-per-anchor form above (memory bound: 8 bytes read per
// element).
#include "common/lab.cuh"
#include "loss/cls_params.cuh"

template <int BLOCK_N>
__global__ void cls_forward(const lab::ClsForwardParams p) {
  const float* __restrict__ logits = p.logits;
  const float* __restrict__ targets = p.targets;
  float* __restrict__ loss = p.loss;
  const int c = p.c, n = p.n;
  const int i = blockIdx.x * BLOCK_N + threadIdx.x;
  if (i >= n) return;
  float sum = 0.0f;
  for (int k = 0; k < c; ++k) {
    const size_t at = size_t(k) * n + i;
    const float x = logits[at];
    sum += fmaxf(x, 0.0f) - x * targets[at] + log1pf(expf(-fabsf(x)));
  }
  loss[i] = sum;
}

template <int BLOCK_N>
__global__ void cls_backward(const lab::ClsBackwardParams p) {
  const float* __restrict__ logits = p.logits;
  const float* __restrict__ targets = p.targets;
  const float* __restrict__ dy = p.dy;
  float* __restrict__ d_logits = p.d_logits;
  const int c = p.c, n = p.n;
  const int i = blockIdx.x * BLOCK_N + threadIdx.x;
  if (i >= n || int(blockIdx.y) >= c) return;
  const size_t at = size_t(blockIdx.y) * n + i;
  const float x = logits[at];
  const float e = expf(-fabsf(x));  // sigmoid(|x|) = 1 / (1 + e), sigmoid(-|x|) = e / (1 + e)
  const float sigmoid = x >= 0.0f ? 1.0f / (1.0f + e) : e / (1.0f + e);
  d_logits[at] = dy[i] * (sigmoid - targets[at]);
}
