// Emulator test kernels that never finish on their own, and one that is slow but makes progress. The
// watchdog must stop the first two within the launch's timeout, naming the spinning thread, and leave the
// third alone however long the whole launch takes.
//
// infinite_loop: thread `stuck` of each block loops forever; the others exit.
// spin_after_barrier: after a barrier, thread 0 spins on a flag that thread 1 sets (a GPU runs both; the
// emulator runs thread 0 until it blocks, so thread 1 never gets to set it). flag: one int, 0.
// spin_in_warp: warp 0 polls, with __any_sync, a flag that thread 32 (warp 1) sets; the emulator runs warp 0
// until it blocks, and its collectives always complete, so warp 1 never runs. flag: one int, 0.
// busy_threads: every thread sums `iters` terms and writes its result; out [gridDim.x * blockDim.x] floats.
extern "C" __global__ void infinite_loop(int* counter, int stuck) {
  if (int(threadIdx.x) != stuck) return;
  volatile int* c = counter;
  for (;;) *c = *c + 1;
}

extern "C" __global__ void spin_after_barrier(int* flag) {
  volatile int* f = flag;
  __syncthreads();
  if (threadIdx.x == 0)
    while (*f == 0) {
    }
  if (threadIdx.x == 1) *f = 1;
}

extern "C" __global__ void spin_in_warp(int* flag) {
  volatile int* f = flag;
  if (threadIdx.x < 32)
    while (!__any_sync(0xffffffffu, *f != 0)) {
    }
  else if (threadIdx.x == 32)
    *f = 1;
}

extern "C" __global__ void busy_threads(float* out, int iters) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  float sum = 0.0f;
  for (int k = 0; k < iters; ++k) sum += 1.0f / float(k + i + 1);
  out[i] = sum;
}
