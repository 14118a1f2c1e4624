// Emulator test kernels: warp votes with partial masks, and block-wide barrier reductions.
//
// warp_votes: pred [T] ints (T = gridDim.x * blockDim.x, a multiple of 32) -> out [T, 4] unsigned. Per
// thread:
//   [0] __ballot_sync over the lanes of its parity (mask 0x55555555 or 0xaaaaaaaa), [1] __any_sync and
//   [2] __all_sync over the same mask, [3] in divergent branches: lanes 0-19 ballot `pred` over 0x000fffff,
//   lanes 20-31 ballot `!pred` over 0xfff00000.
// block_votes: pred [T] ints -> out [gridDim.x, 3] ints: __syncthreads_count, _and, _or of pred over the
// block.
extern "C" __global__ void warp_votes(const int* __restrict__ pred, unsigned* __restrict__ out) {
  const int gid = blockIdx.x * blockDim.x + threadIdx.x;
  const int lane = threadIdx.x % 32;
  const int p = pred[gid];
  const unsigned parity_mask = (lane & 1) ? 0xaaaaaaaau : 0x55555555u;
  unsigned* o = out + size_t(gid) * 4;
  o[0] = __ballot_sync(parity_mask, p);
  o[1] = unsigned(__any_sync(parity_mask, p));
  o[2] = unsigned(__all_sync(parity_mask, p));
  if (lane < 20)
    o[3] = __ballot_sync(0x000fffffu, p);
  else
    o[3] = __ballot_sync(0xfff00000u, !p);
}

extern "C" __global__ void block_votes(const int* __restrict__ pred, int* __restrict__ out) {
  const int p = pred[blockIdx.x * blockDim.x + threadIdx.x];
  const int count = __syncthreads_count(p);
  const int all = __syncthreads_and(p);
  const int any = __syncthreads_or(p);
  if (threadIdx.x == 0) {
    out[blockIdx.x * 3 + 0] = count;
    out[blockIdx.x * 3 + 1] = all;
    out[blockIdx.x * 3 + 2] = any;
  }
}
