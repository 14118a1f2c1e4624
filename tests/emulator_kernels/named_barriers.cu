// Emulator test kernels: the named barriers of common/lab_named_barrier.cuh. Each writes what the PTX ISA
// says it should see, so the same expectations check the emulator and the GPU.
//
// named_barrier_turns(out, rounds): block 256, two warpgroups taking turns as the consumers of
//   attention/flash_attn_wgmma.cu do: warpgroup w waits on barrier 1 + w (count 256), the other signals it
//   with arrive after its own turn; warpgroup 1 signals barrier 1 once first, so warpgroup 0 goes first. In
//   a turn every thread records the shared turn counter, out[(w * rounds + r) * 128 + t] (expected 2 r + w),
//   then its warpgroup meets on barrier 3 + w (count 128) and thread 0 of the warpgroup advances the counter.
// named_barrier_misuse(mode): block 64, wrong on purpose, for the emulator's errors. 0: warp 0 waits on a
//   barrier of count 64 that warp 1 never reaches (it exits); 1: count 48; 2: id 0; 3: warp 0 syncs with
//   count 64, warp 1 with count 32, in one phase.
#include "../../kernels/common/lab.cuh"
#include "../../kernels/common/lab_named_barrier.cuh"

__global__ void named_barrier_turns(int* out, int rounds) {
  __shared__ volatile int turn;
  const int t = threadIdx.x % 128, w = threadIdx.x / 128;
  if (threadIdx.x == 0) turn = 0;
  __syncthreads();
  if (w == 1) lab_named_barrier_arrive(1, 256);
  for (int r = 0; r < rounds; ++r) {
    lab_named_barrier_sync(1 + w, 256);
    out[(w * rounds + r) * 128 + t] = turn;
    lab_named_barrier_sync(3 + w, 128);
    if (t == 0) turn = turn + 1;
    if (w == 0 || r + 1 < rounds) lab_named_barrier_arrive(2 - w, 256);
  }
}

__global__ void named_barrier_misuse(int mode) {
  const int warp = threadIdx.x / 32;
  if (mode == 0) {
    if (warp == 1) return;
    lab_named_barrier_sync(1, 64);
  } else if (mode == 1) {
    lab_named_barrier_sync(1, 48);
  } else if (mode == 2) {
    lab_named_barrier_sync(0, 64);
  } else {
    lab_named_barrier_sync(2, warp == 0 ? 64 : 32);
  }
}
