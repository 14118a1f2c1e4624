// Block-wide float64 sum and max over THREADS threads (a power of two) through `scratch` (THREADS shared
// doubles), in a fixed tree order, so the result does not depend on scheduling: the deterministic reductions
// of tal_assign.cu and head_loss.cu. Every thread of the CTA calls them and gets the result.
#pragma once

template <int THREADS, class Combine>
__device__ double lab_block_reduce(double value, double* scratch, Combine combine) {
  scratch[threadIdx.x] = value;
  __syncthreads();
  for (int stride = THREADS / 2; stride > 0; stride >>= 1) {
    if (int(threadIdx.x) < stride)
      scratch[threadIdx.x] = combine(scratch[threadIdx.x], scratch[threadIdx.x + stride]);
    __syncthreads();
  }
  const double result = scratch[0];
  __syncthreads();
  return result;
}

template <int THREADS>
__device__ double lab_block_sum(double value, double* scratch) {
  return lab_block_reduce<THREADS>(value, scratch, [](double a, double b) { return a + b; });
}

template <int THREADS>
__device__ double lab_block_max(double value, double* scratch) {
  return lab_block_reduce<THREADS>(value, scratch, [](double a, double b) { return fmax(a, b); });
}
