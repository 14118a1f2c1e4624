// Emulator test kernels: the wgmma primitives of common/lab_wgmma.cuh, one product at a time. The test
// composes the shared-memory image (operands in a canonical layout) and, for the RS form, each thread's A
// registers by hand from the PTX ISA's layouts, so the same expectations check the emulator and the GPU.
//
// wgmma_once<N, RS, TRANS_A, TRANS_B>: copies `image` (chunks x 16 bytes) into dynamic shared memory, then
// one
//   m64nNk16 product in fp16 and its commit, D = A * B (scale_d 0, D starts as NaN): A from the image
//   (descriptor at a_offset with a_lbo / a_sbo, K-major (TRANS_A 0) or M-major (1)) or, RS, from a_frag[t * 4
//   .. t * 4 + 3]; B from the image at b_offset with b_lbo / b_sbo, K-major (TRANS_B 0) or N-major (1); all
//   descriptors without swizzle. Thread t writes d[i] to out[t * N / 2 + i]. Block 128 (or more, for the
//   errors). `mode`:
//     0: fence, product, commit, wait<0>, write
//     1: writes d once before the wait (to out), once after (to out + 128 * N / 2)
//     2: after the commit, the block zeroes the shared image (barrier between), then waits and writes
//     3: two products in two groups (the second with scale_d 1, so D = 2 A B at the end); writes d after
//        wait<1> (to out) and after wait<0> (to out + 128 * N / 2)
//     4: only lanes 0-15 of each warp make the call (wrong on purpose)
// wgmma_static_shared: a descriptor of a static __shared__ array (the emulator cannot address it). Block 128.
// wgmma_registers: setmaxnreg (below).
#include "../../kernels/common/lab.cuh"
#include "../../kernels/common/lab_mma.cuh"
#include "../../kernels/common/lab_swizzle.cuh"
#include "../../kernels/common/lab_wgmma.cuh"

template <int N, int RS, int TRANS_A, int TRANS_B>
__global__ void wgmma_once(const uint4* image, int chunks, const uint32_t* a_frag, unsigned a_offset,
                           unsigned a_lbo, unsigned a_sbo, unsigned b_offset, unsigned b_lbo, unsigned b_sbo,
                           float* out, int mode) {
  LAB_DYNAMIC_SHARED(uint4, smem);
  for (int i = threadIdx.x; i < chunks; i += blockDim.x) smem[i] = image[i];
  lab_fence_proxy_async_shared();
  __syncthreads();
  const unsigned char* base = reinterpret_cast<const unsigned char*>(smem);
  const unsigned t = threadIdx.x;
  uint32_t a[4] = {0, 0, 0, 0};
  if (RS)
    for (int r = 0; r < 4; ++r) a[r] = a_frag[(t % 128) * 4 + r];
  float d[N / 2];
  for (int i = 0; i < N / 2; ++i) d[i] = __int_as_float(0x7fffffff);
  const unsigned long long desc_b = lab_wgmma_desc(base + b_offset, b_lbo, b_sbo, LAB_SWIZZLE_NONE);
  auto product = [&](int scale_d) {
    if (RS)
      lab_wgmma_rs<LAB_F16, N, TRANS_B>(d, a, desc_b, scale_d);
    else
      lab_wgmma_ss<LAB_F16, N, TRANS_A, TRANS_B>(
          d, lab_wgmma_desc(base + a_offset, a_lbo, a_sbo, LAB_SWIZZLE_NONE), desc_b, scale_d);
    lab_wgmma_commit_group();
  };
  lab_wgmma_fence();
  if (mode == 4 && t % 32 >= 16) return;
  product(0);
  float* second = out + 128 * (N / 2);
  if (mode == 1)
    for (int i = 0; i < N / 2; ++i) out[t * (N / 2) + i] = d[i];
  if (mode == 2) {
    __syncthreads();
    for (int i = threadIdx.x; i < chunks; i += blockDim.x) smem[i] = make_uint4(0, 0, 0, 0);
    __syncthreads();
  }
  if (mode == 3) {
    lab_wgmma_fence();
    product(1);
    lab_wgmma_wait_group<1>();
    for (int i = 0; i < N / 2; ++i) out[t * (N / 2) + i] = d[i];
  }
  lab_wgmma_wait_group<0>();
  lab_wgmma_hold(d);
  float* after = mode == 1 || mode == 3 ? second : out;
  for (int i = 0; i < N / 2; ++i) after[t * (N / 2) + i] = d[i];
}

extern "C" __global__ void wgmma_static_shared(float* out) {
  __shared__ __align__(16) unsigned short tile[64 * 16];
  for (int i = threadIdx.x; i < 64 * 16; i += blockDim.x) tile[i] = 0;
  __syncthreads();
  float d[4];
  lab_wgmma_fence();
  lab_wgmma_ss<LAB_F16, 8, 0, 0>(d, lab_wgmma_desc(tile, 1024, 128, LAB_SWIZZLE_NONE),
                                 lab_wgmma_desc(tile, 128, 128, LAB_SWIZZLE_NONE), 0);
  lab_wgmma_commit_group();
  lab_wgmma_wait_group<0>();
  out[threadIdx.x] = d[0];
}

// wgmma_registers: the producer warpgroup (threads 0-127) gives registers back, the consumer (128-255) takes
// them, then each writes out[t] = t. Block 256.
extern "C" __global__ void __launch_bounds__(256, 1) wgmma_registers(int* out) {
  if (threadIdx.x < 128)
    lab_setmaxnreg_dec<40>();
  else
    lab_setmaxnreg_inc<232>();
  out[threadIdx.x] = int(threadIdx.x);
}
