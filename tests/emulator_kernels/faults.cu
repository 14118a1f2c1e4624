// Emulator test kernels that are wrong on purpose: each must end its launch with an error that names the
// kernel, the block and the source line, never hang or crash the process.
//
// divergent_barrier: threads below `split` and the others wait at two different __syncthreads.
// exit_before_barrier: threads from `limit` up return; the rest wait at a __syncthreads.
// warp_deadlock: lane 0 of each warp waits in a full-mask shuffle while lanes 1-31 wait at __syncthreads.
// write_with_offset: thread i < n writes out[i + offset] (out-of-bounds when offset > 0 and out holds n
// floats). assert_positive: device assert that every in[i] > 0. Block: one; out [blockDim.x] floats unless
// stated.
extern "C" __global__ void divergent_barrier(float* out, int split) {
  if (int(threadIdx.x) < split) {
    out[threadIdx.x] = 1.0f;
    __syncthreads();
  } else {
    __syncthreads();
    out[threadIdx.x] = 2.0f;
  }
}

extern "C" __global__ void exit_before_barrier(float* out, int limit) {
  if (int(threadIdx.x) >= limit) return;
  __syncthreads();
  out[threadIdx.x] = 1.0f;
}

extern "C" __global__ void warp_deadlock(float* out) {
  float v = float(threadIdx.x);
  if (threadIdx.x % 32 == 0) v = __shfl_xor_sync(0xffffffffu, v, 1);
  __syncthreads();
  out[threadIdx.x] = v;
}

extern "C" __global__ void write_with_offset(float* out, int n, int offset) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i + offset] = 1.0f;
}

extern "C" __global__ void assert_positive(const float* in, int n) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) assert(in[i] > 0.0f);
}
