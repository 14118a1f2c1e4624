// Emulator test kernels: the tf32 side of common/lab_wgmma.cuh (m64nNk8 with float operands in shared memory,
// both K-major; the test composes the shared image by hand from the PTX ISA's layouts, so the same
// expectations check the emulator and the GPU). Block 128, dynamic shared memory = the image's bytes + 1024
// (the image is copied to the first 1024-byte boundary, where the swizzle patterns start).
//
// wgmma_tf32_steps<N>: D = sum over s < steps of A_s * B_s, one m64nNk8 product per step in one commit group
//   (scale_d 0 on the first, D starts as NaN): A_s's descriptor starts at s * a_step bytes (K-major,
//   a_lbo / a_sbo), B_s's at b_offset + s * b_step (b_lbo / b_sbo), both in swizzle mode `swizzle`. A k8 step
//   inside a swizzled row is + 32 bytes, without swizzle + 2 core matrices (2 LBO). Thread t writes d[i] to
//   out[t * N / 2 + i].
#include "../../kernels/common/lab.cuh"
#include "../../kernels/common/lab_mma.cuh"
#include "../../kernels/common/lab_swizzle.cuh"
#include "../../kernels/common/lab_wgmma.cuh"

template <int N>
__global__ void wgmma_tf32_steps(const uint4* image, int chunks, int steps, unsigned a_step, unsigned a_lbo,
                                 unsigned a_sbo, unsigned b_offset, unsigned b_step, unsigned b_lbo,
                                 unsigned b_sbo, int swizzle, float* out) {
  LAB_DYNAMIC_SHARED(unsigned char, raw);
  uint4* smem = reinterpret_cast<uint4*>(lab_smem_align_1024(raw));
  for (int i = threadIdx.x; i < chunks; i += blockDim.x) smem[i] = image[i];
  lab_fence_proxy_async_shared();
  __syncthreads();
  const unsigned char* base = reinterpret_cast<const unsigned char*>(smem);
  float d[N / 2];
  for (int i = 0; i < N / 2; ++i) d[i] = __int_as_float(0x7fffffff);
  lab_wgmma_fence();
  for (int s = 0; s < steps; ++s)
    lab_wgmma_ss<LAB_F32, N, 0, 0>(d, lab_wgmma_desc(base + s * a_step, a_lbo, a_sbo, swizzle),
                                   lab_wgmma_desc(base + b_offset + s * b_step, b_lbo, b_sbo, swizzle),
                                   s > 0);
  lab_wgmma_commit_group();
  lab_wgmma_wait_group<0>();
  lab_wgmma_hold(d);
  for (int i = 0; i < N / 2; ++i) out[threadIdx.x * (N / 2) + i] = d[i];
}
