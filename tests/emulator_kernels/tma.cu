// Emulator test kernels: the mbarriers of common/lab_mbarrier.cuh and the TMA copies of common/lab_tma.cuh.
// Each writes what the PTX ISA says it should see, so the same expectations check the emulator and the GPU.
//
// mbarrier_phases: 64 threads, one mbarrier of count 64, `phases` phases. In phase k thread 0 announces
//   16 (k + 1) transaction bytes and thread 63 takes them off (complete_tx); each thread records
//   out[(k * 64 + t) * 3 + 0] = try_wait.parity(k & 1) before its own arrival (0: the phase cannot be
//   complete),
//   + 1 = 1 once wait_parity(k & 1) returned, + 2 = try_wait.parity((k + 1) & 1) right after (0: the next
//   phase needs this thread's arrival). Block 64.
// mbarrier_misuse(mode): wrong on purpose, for the emulator's errors. 0: count 2 with one arrival, then every
//   thread waits; 1: 64 bytes announced, 32 completed, then waits; 2: arrive on an mbarrier never
//   initialised; 3: 32 bytes announced on the last arrival, 64 completed. Block 32.
// tma_load_raw(map, rank, c0..c4, out, box_bytes, smem_offset): one TMA load of the box at (c0, ...) into
//   dynamic shared memory at a 1024-byte boundary + smem_offset, then out[i] = its bytes as they lie
//   (swizzled), i < box_bytes. Block 32; dynamic shared memory 2048 + box_bytes.
// tma_store_box(map, rank, c0..c4, in, box_bytes): shared memory <- in (box_bytes, as the box lies), then one
//   TMA store of it to the box at (c0, ...). Block 32; dynamic shared memory 1024 + box_bytes.
#include "../../kernels/common/lab.cuh"
#include "../../kernels/common/lab_mma.cuh"
#include "../../kernels/common/lab_swizzle.cuh"
#include "../../kernels/common/lab_wgmma.cuh"
#include "../../kernels/common/lab_tensor_map.cuh"
#include "../../kernels/common/lab_mbarrier.cuh"
#include "../../kernels/common/lab_tma.cuh"

__global__ void mbarrier_phases(int* out, int phases) {
  __shared__ __align__(8) uint64_t bar;
  const int t = threadIdx.x;
  if (t == 0) {
    lab_mbarrier_init(&bar, 64);
    lab_fence_mbarrier_init();
  }
  __syncthreads();
  for (int k = 0; k < phases; ++k) {
    int* o = out + (k * 64 + t) * 3;
    if (t == 0) lab_mbarrier_expect_tx(&bar, 16u * unsigned(k + 1));
    o[0] = lab_mbarrier_try_wait_parity(&bar, unsigned(k) & 1u);
    if (t == 63) lab_mbarrier_complete_tx(&bar, 16u * unsigned(k + 1));
    lab_mbarrier_arrive(&bar);
    lab_mbarrier_wait_parity(&bar, unsigned(k) & 1u);
    o[1] = 1;
    o[2] = lab_mbarrier_try_wait_parity(&bar, unsigned(k + 1) & 1u);
  }
}

__global__ void mbarrier_misuse(int mode) {
  __shared__ __align__(8) uint64_t bar;
  if (threadIdx.x == 0 && mode != 2) lab_mbarrier_init(&bar, mode == 0 ? 2 : 1);
  __syncthreads();
  if (threadIdx.x == 0) {
    if (mode == 1) {
      lab_mbarrier_arrive_expect_tx(&bar, 64);
      lab_mbarrier_complete_tx(&bar, 32);
    } else if (mode == 3) {
      lab_mbarrier_arrive_expect_tx(&bar, 32);
      lab_mbarrier_complete_tx(&bar, 64);
    } else {
      lab_mbarrier_arrive(&bar);
    }
  }
  lab_mbarrier_wait_parity(&bar, 0);
}

// The box at `c` of a map of rank 1-5.
__device__ void tma_load_rank(void* smem, const void* map, uint64_t* bar, int rank, const int* c) {
  if (rank == 1) lab_tma_load_1d(smem, map, bar, c[0]);
  if (rank == 2) lab_tma_load_2d(smem, map, bar, c[0], c[1]);
  if (rank == 3) lab_tma_load_3d(smem, map, bar, c[0], c[1], c[2]);
  if (rank == 4) lab_tma_load_4d(smem, map, bar, c[0], c[1], c[2], c[3]);
  if (rank == 5) lab_tma_load_5d(smem, map, bar, c[0], c[1], c[2], c[3], c[4]);
}

__global__ void tma_load_raw(const __grid_constant__ lab::TensorMap map, int rank, int c0, int c1, int c2,
                             int c3, int c4, unsigned char* out, int box_bytes, int smem_offset) {
  __shared__ __align__(8) uint64_t bar;
  LAB_DYNAMIC_SHARED(unsigned char, raw);
  unsigned char* box =
      raw + (1024u - unsigned(reinterpret_cast<unsigned long long>(raw) % 1024u)) % 1024u + smem_offset;
  if (threadIdx.x == 0) {
    lab_mbarrier_init(&bar, 1);
    lab_fence_mbarrier_init();
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    const int c[5] = {c0, c1, c2, c3, c4};
    lab_mbarrier_arrive_expect_tx(&bar, unsigned(box_bytes));
    tma_load_rank(box, &map, &bar, rank, c);
  }
  lab_mbarrier_wait_parity(&bar, 0);
  for (int i = threadIdx.x; i < box_bytes; i += blockDim.x) out[i] = box[i];
}

__global__ void tma_store_box(const __grid_constant__ lab::TensorMap map, int rank, int c0, int c1, int c2,
                              int c3, int c4, const unsigned char* in, int box_bytes) {
  LAB_DYNAMIC_SHARED(unsigned char, raw);
  unsigned char* box = raw + (1024u - unsigned(reinterpret_cast<unsigned long long>(raw) % 1024u)) % 1024u;
  for (int i = threadIdx.x; i < box_bytes; i += blockDim.x) box[i] = in[i];
  lab_fence_proxy_async_shared();
  __syncthreads();
  if (threadIdx.x == 0) {
    if (rank == 1) lab_tma_store_1d(&map, box, c0);
    if (rank == 2) lab_tma_store_2d(&map, box, c0, c1);
    if (rank == 3) lab_tma_store_3d(&map, box, c0, c1, c2);
    if (rank == 4) lab_tma_store_4d(&map, box, c0, c1, c2, c3);
    if (rank == 5) lab_tma_store_5d(&map, box, c0, c1, c2, c3, c4);
    lab_tma_store_commit();
    lab_tma_store_wait_read<0>();
  }
}
