// Emulator test kernels: the e4m3 side of common/lab_wgmma.cuh (the test composes every operand by hand from
// the PTX ISA's layouts, so the same expectations check the emulator and the GPU). Block 128, dynamic shared
// memory = the image's bytes + 1024 (the image is copied to the first 1024-byte boundary, where the swizzle
// patterns start).
//
// wgmma_e4m3_once<N, RS>: one m64nNk32 e4m3 product and its commit, D = A * B (scale_d 0, D starts as NaN):
//   A from the image at 0 (K-major, a_lbo / a_sbo) or, RS, from a_frag[t * 4 .. t * 4 + 3]; B from the image
//   at b_offset (K-major, b_lbo / b_sbo); both descriptors in swizzle mode `swizzle`. Thread t writes d[i] to
//   out[t * N / 2 + i].
// wgmma_e4m3_attention: the P V step of an fp8 attention: S = A * B (SS, N 64: the image's A at 0 and B at
//   b_offset as above), P = e4m3(S * p_scale) by lab_wgmma_e4m3_a_from_accumulators, O = P * V (two RS k32
//   products, N 16) with V^T at v_offset: 16 rows of 64 keys, K-major without swizzle (LBO 256, SBO 128),
//   the keys of each 16 in lab_e4m3_p_column order. Thread t writes O's d[i] to out[t * 8 + i].
// e4m3_convert: pairs[i] = lab_e4m3x2(in[2 i], in[2 i + 1]) for i < n; back[c] = lab_e4m3_to_float(c) for
//   every code c < 256. Any block shape.
#include "../../kernels/common/lab.cuh"
#include "../../kernels/common/lab_mma.cuh"
#include "../../kernels/common/lab_swizzle.cuh"
#include "../../kernels/common/lab_wgmma.cuh"

// Copies the image to the block's aligned shared window and returns its start.
__device__ unsigned char* e4m3_stage(const uint4* image, int chunks) {
  LAB_DYNAMIC_SHARED(unsigned char, raw);
  uint4* smem = reinterpret_cast<uint4*>(lab_smem_align_1024(raw));
  for (int i = threadIdx.x; i < chunks; i += blockDim.x) smem[i] = image[i];
  lab_fence_proxy_async_shared();
  __syncthreads();
  return reinterpret_cast<unsigned char*>(smem);
}

template <int N, int RS>
__global__ void wgmma_e4m3_once(const uint4* image, int chunks, const uint32_t* a_frag, unsigned a_lbo,
                                unsigned a_sbo, unsigned b_offset, unsigned b_lbo, unsigned b_sbo, int swizzle,
                                float* out) {
  unsigned char* base = e4m3_stage(image, chunks);
  const unsigned t = threadIdx.x;
  uint32_t a[4] = {0, 0, 0, 0};
  if (RS)
    for (int r = 0; r < 4; ++r) a[r] = a_frag[t * 4 + r];
  float d[N / 2];
  for (int i = 0; i < N / 2; ++i) d[i] = __int_as_float(0x7fffffff);
  const unsigned long long desc_b = lab_wgmma_desc(base + b_offset, b_lbo, b_sbo, swizzle);
  lab_wgmma_fence();
  if (RS)
    lab_wgmma_rs<LAB_E4M3, N, 0>(d, a, desc_b, 0);
  else
    lab_wgmma_ss<LAB_E4M3, N, 0, 0>(d, lab_wgmma_desc(base, a_lbo, a_sbo, swizzle), desc_b, 0);
  lab_wgmma_commit_group();
  lab_wgmma_wait_group<0>();
  lab_wgmma_hold(d);
  for (int i = 0; i < N / 2; ++i) out[t * (N / 2) + i] = d[i];
}

extern "C" __global__ void wgmma_e4m3_attention(const uint4* image, int chunks, unsigned a_lbo, unsigned a_sbo,
                                                unsigned b_offset, unsigned b_lbo, unsigned b_sbo,
                                                unsigned v_offset, float p_scale, float* out) {
  unsigned char* base = e4m3_stage(image, chunks);
  float s[32], o[8];
  lab_wgmma_fence();
  lab_wgmma_ss<LAB_E4M3, 64, 0, 0>(s, lab_wgmma_desc(base, a_lbo, a_sbo, LAB_SWIZZLE_NONE),
                                   lab_wgmma_desc(base + b_offset, b_lbo, b_sbo, LAB_SWIZZLE_NONE), 0);
  lab_wgmma_commit_group();
  lab_wgmma_wait_group<0>();
  lab_wgmma_hold(s);
  uint32_t p0[4], p1[4];
  lab_wgmma_e4m3_a_from_accumulators<0>(p0, s, p_scale);
  lab_wgmma_e4m3_a_from_accumulators<1>(p1, s, p_scale);
  lab_wgmma_fence();
  lab_wgmma_rs<LAB_E4M3, 16, 0>(o, p0, lab_wgmma_desc(base + v_offset, 256, 128, LAB_SWIZZLE_NONE), 0);
  lab_wgmma_rs<LAB_E4M3, 16, 0>(o, p1, lab_wgmma_desc(base + v_offset + 512, 256, 128, LAB_SWIZZLE_NONE), 1);
  lab_wgmma_commit_group();
  lab_wgmma_wait_group<0>();
  lab_wgmma_hold(o);
  for (int i = 0; i < 8; ++i) out[threadIdx.x * 8 + i] = o[i];
}

extern "C" __global__ void e4m3_convert(const float* in, int n, unsigned short* pairs, float* back) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) pairs[i] = lab_e4m3x2(in[2 * i], in[2 * i + 1]);
  if (i < 256) back[i] = lab_e4m3_to_float((unsigned char)i);
}
