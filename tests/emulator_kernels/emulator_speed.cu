// Emulator speed probes (lab_tests "[.emulator-speed]"): the cost of barriers and of plain fibers.
//
// sync_loop: every thread adds its index into out[threadIdx.x] `rounds` times, with a __syncthreads after
// each
//   round. out [blockDim.x] floats, one block.
// touch_once: out[i] = i for i < n. Grid: ceil(n / blockDim.x).
extern "C" __global__ void sync_loop(float* out, int rounds) {
  float acc = 0.0f;
  for (int r = 0; r < rounds; ++r) {
    acc += float(threadIdx.x);
    __syncthreads();
  }
  out[threadIdx.x] = acc;
}

extern "C" __global__ void touch_once(float* out, int n) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = float(i);
}
