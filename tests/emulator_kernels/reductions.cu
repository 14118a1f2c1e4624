// Emulator test kernels: a shared-memory tree reduction and warp shuffle reductions in all four directions.
//
// tree_sum<BLOCK>: in [n] floats -> out [gridDim.x], out[b] = sum of in[b*BLOCK .. b*BLOCK+BLOCK) (zero past
// n).
//   Grid: ceil(n / BLOCK); block: BLOCK threads. Static __shared__ partial sums, halved under __syncthreads.
// warp_shuffles: in [T] floats, T = gridDim.x * blockDim.x (a multiple of 32) -> out [T/32, 4, 32]: per warp
// and
//   lane, row 0 = butterfly sum (__shfl_xor_sync, via lab_warp_sum), row 1 = shfl_down tree sum in double
//   (lane 0 holds the total), row 2 = inclusive prefix sum of int(in * 100) (shfl_up), row 3 = the value of
//   the next lane within segments of 8 (__shfl_sync with width 8).
#include "../../kernels/common/lab.cuh"

template <int BLOCK>
__global__ void tree_sum(const float* __restrict__ in, float* __restrict__ out, int n) {
  __shared__ float partial[BLOCK];
  const int i = blockIdx.x * BLOCK + threadIdx.x;
  partial[threadIdx.x] = i < n ? in[i] : 0.0f;
  __syncthreads();
  for (int stride = BLOCK / 2; stride > 0; stride >>= 1) {
    if (threadIdx.x < stride) partial[threadIdx.x] += partial[threadIdx.x + stride];
    __syncthreads();
  }
  if (threadIdx.x == 0) out[blockIdx.x] = partial[0];
}

extern "C" __global__ void warp_shuffles(const float* __restrict__ in, float* __restrict__ out) {
  const int gid = blockIdx.x * blockDim.x + threadIdx.x;
  const int lane = threadIdx.x % 32;
  float* o = out + size_t(gid / 32) * 4 * 32;
  const float v = in[gid];
  o[lane] = lab_warp_sum(v);
  double d = v;
  for (int offset = 16; offset > 0; offset >>= 1) d += __shfl_down_sync(LAB_FULL_MASK, d, offset);
  o[32 + lane] = float(d);
  int scan = int(v * 100.0f);
  for (int offset = 1; offset < 32; offset <<= 1) {
    const int up = __shfl_up_sync(LAB_FULL_MASK, scan, offset);
    if (lane >= offset) scan += up;
  }
  o[64 + lane] = float(scan);
  o[96 + lane] = __shfl_sync(LAB_FULL_MASK, v, lane + 1, 8);
}
