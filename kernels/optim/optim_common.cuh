// Device helpers of the optimizer kernels: which tensor of the table a block works on, and the 16-bit copy
// of an updated weight.
#pragma once
#include "common/lab.cuh"
#include "common/lab_mma.cuh"
#include "optim/optim_params.cuh"

// The tensor whose blocks hold `block`: the last entry with first_block <= block (binary search; the table
// is in launch order, its first entry starts at block 0).
__device__ __forceinline__ int optim_tensor_of_block(const lab::OptimTensor* tensors, int n_tensors,
                                                     int block) {
  int lo = 0, hi = n_tensors - 1;
  while (lo < hi) {
    const int mid = (lo + hi + 1) / 2;
    if (tensors[mid].first_block <= block)
      lo = mid;
    else
      hi = mid - 1;
  }
  return lo;
}

// The element range [begin, end) of `t` that this block covers.
__device__ __forceinline__ void optim_block_range(const lab::OptimTensor& t, int block, long long& begin,
                                                  long long& end) {
  begin = (long long)(block - t.first_block) * lab::kOptimBlockElems;
  end = begin + lab::kOptimBlockElems < t.count ? begin + lab::kOptimBlockElems : t.count;
}

// The weight rounded to nearest even in the 16-bit type (LAB_F16 or LAB_BF16).
__device__ __forceinline__ unsigned short optim_to_16bit(float v, int half_type) {
  const uint32_t packed = half_type == LAB_BF16 ? lab_pack2<LAB_BF16>(v, 0.0f) : lab_pack2<LAB_F16>(v, 0.0f);
  return (unsigned short)(packed & 0xffffu);
}

// False when the step's gate (SgdStepParams::gate ...) is set and holds a NaN or an infinity: the launch then
// writes nothing. A NaN fails the comparison.
__device__ __forceinline__ bool optim_step_taken(const float* gate) {
  return gate == nullptr || fabsf(*gate) <= 3.402823466e38f;
}
