// Deterministic block-wide sums: one fixed tree in shared memory, so the same inputs give the same total on
// every run and every backend (no atomics, no warp shuffles whose order a compiler may change).
#pragma once
#include "common/lab.cuh"

// Sums v over the block's Threads threads (Threads = blockDim.x, a power of two) in float64 by halving
// strides; every thread gets the total. Ends with a barrier, so a kernel may call it again.
template <int Threads>
__device__ __forceinline__ double lab_block_sum(double v) {
  __shared__ double sums[Threads];
  sums[threadIdx.x] = v;
  __syncthreads();
  for (int width = Threads / 2; width > 0; width /= 2) {
    if (int(threadIdx.x) < width) sums[threadIdx.x] += sums[threadIdx.x + width];
    __syncthreads();
  }
  const double total = sums[0];
  __syncthreads();
  return total;
}
