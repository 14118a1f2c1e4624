// The store every backward kernel of the weightless layers ends with: a gradient either starts a buffer
// (accumulate = 0: no memset needed for the first contribution) or adds to what earlier contributions left
// there (accumulate = 1: residual branches, a tensor read by several layers).
#pragma once
#include "common/lab.cuh"

namespace nn {

__device__ __forceinline__ void store_gradient(float* dst, float value, int accumulate) {
  *dst = accumulate ? *dst + value : value;
}

}  // namespace nn
