// Hopper's warpgroup tensor-core primitives (PTX wgmma.mma_async m64nNk16 with fp16 / bfloat16 inputs,
// m64nNk32 with e4m3 inputs and m64nNk8 with tf32 inputs, float accumulators, its fences and groups,
// fence.proxy.async, setmaxnreg, the e4m3 conversions) on both backends. NVRTC gets inline PTX, which needs
// the architecture-specific target: a kernel family using this header sets KernelSpec::arch_specific (NVRTC
// then compiles for sm_90a). The cpu emulator implements the same functions with the same per-thread layouts
// (nvrtc_runtime/cpu/device/lab_emu_wgmma.hpp).
//
// A warpgroup is 4 consecutive warps whose first warp index is a multiple of 4 (threads 128 k .. 128 k + 127
// of the block); all its 128 threads execute every wgmma call together. One lab_wgmma_* call computes
//   D[64][N] = A[64][16] * B[16][N] + (scale_d ? D : 0)
// with A from shared memory (lab_wgmma_ss) or registers (lab_wgmma_rs), B from shared memory. The call only
// starts the product: D's registers change, and the shared operands may be read, until the group holding it
// completes. The protocol (PTX ISA, "Asynchronous Warpgroup Level Matrix Multiply-Accumulate"):
//   lab_fence_proxy_async_shared(); __syncthreads();  // operands written by ordinary stores, now visible
//   lab_wgmma_fence();               // orders earlier register accesses (D, A fragments) before the wgmma
//   lab_wgmma_ss<...>(d, ...); ...   // any number of products
//   lab_wgmma_commit_group();        // closes a group of the products issued since the last commit
//   lab_wgmma_wait_group<0>();       // waits until at most 0 (or N) committed groups are still pending
//   lab_wgmma_hold(d);               // D is read after this point, not before
//
// Register layouts (PTX ISA, "Matrix Fragments for wgmma.mma_async.m64nNk16"); for thread t of the warpgroup,
// w = t / 32 (its warp in the group), g = t % 32 / 4, q = t % 4:
//   D float, d[N / 2]: d[i] = D[16 w + g + 8 ((i / 2) % 2)][8 (i / 4) + 2 q + i % 2]
//   A (RS form), a[4] (two 16-bit elements each, lower index in the low half): rows 16 w.. of A as
//       mma.m16n8k16's A (lab_mma.cuh): a[0] = A[16w+g][2q, 2q+1], a[1] = A[16w+g+8][2q, 2q+1],
//       a[2] = A[16w+g][2q+8, 2q+9], a[3] = A[16w+g+8][2q+8, 2q+9]
//
// e4m3 inputs (DT LAB_E4M3, PTX m64nNk32.f32.e4m3.e4m3): one call computes D[64][N] = A[64][32] * B[32][N] +
// (scale_d ? D : 0); both shared operands K-major (TRANS 0 only); D's layout as above. The A fragment (RS,
// "Matrix Fragments for wgmma.mma_async.m64nNk32"), four e4m3 per register, the lower k in the lower byte:
//   a[0] = A[16w+g][4q .. 4q+3], a[1] = A[16w+g+8][4q .. 4q+3], a[2] = A[16w+g][4q+16 .. 4q+19],
//   a[3] = A[16w+g+8][4q+16 .. 4q+19]
// Shared layouts: those of the 16-bit K-major operands with 1-byte elements (a core matrix row holds 16 k):
//   no swizzle: (i % 8) * 16 + (i / 8) * SBO + k % 16 + (k / 16) * LBO; swizzled: (i % 8) * W + (i / 8) * SBO + k
// (a k32 step is again + 32 bytes). lab_e4m3x2 / lab_e4m3_to_float convert (cvt.rn.satfinite.e4m3x2.f32 and
// cvt.rn.f16x2.e4m3x2), lab_wgmma_e4m3_a_from_accumulators makes a P fragment from S's accumulators.
//
// tf32 inputs (DT LAB_F32, PTX m64nNk8.f32.tf32.tf32, SS form only here): operands are stored as float
// (4-byte elements) and one call computes D[64][N] = A[64][8] * B[8][N] + (scale_d ? D : 0); both shared operands
// K-major (TRANS 0 only); D's layout as above. The tensor cores read each float as tf32: the emulator drops
// the 13 low mantissa bits (truncation, as for mma.sync tf32 in lab_emu_mma.hpp; the [gpu] test of
// tests/test_emulator_wgmma_tf32.cpp checks that against the H200 bit for bit), so a kernel that wants
// rounding converts with lab_to_tf32 before storing the operand. Shared layouts: those of the 16-bit K-major
// operands with 4-byte elements (a core matrix row holds 4 k): no swizzle (i % 8) * 16 + (i / 8) * SBO +
// (k % 4) * 4 + (k / 4) * LBO; swizzled (i % 8) * W + (i / 8) * SBO + k * 4 (a k8 step is again + 32 bytes,
// a 128-byte swizzled row 32 floats).
//
// Shared-memory operands are described by a 64-bit matrix descriptor (lab_wgmma_desc, encoding in
// lab_swizzle.cuh) and laid out in the PTX ISA's canonical layouts ("Shared Memory Matrix Layout"), for the
// 16-bit types (T = 8 elements = 16 bytes; W = the swizzle mode's row bytes; LBO / SBO = the descriptor's
// leading / stride byte offsets). Element (i, k) of an operand, i the M index of A or the N index of B, lies
// at byte offset (then swizzled, lab_swizzle_address, on the absolute shared address):
//   K-major (TRANS 0; A row-major, B stored as rows of N), no swizzle:
//       (i % 8) * 16 + (i / 8) * SBO + (k % 8) * 2 + (k / 8) * LBO      (8 x 16-byte core matrices)
//   K-major, 32B / 64B / 128B: (i % 8) * W + (i / 8) * SBO + k * 2   (LBO unused; rows of W bytes)
//   MN-major (TRANS 1; A stored as rows of M, B row-major), no swizzle:
//       (i % 8) * 2 + (i / 8) * SBO + (k % 8) * 16 + (k / 8) * LBO
//   MN-major, 32B / 64B / 128B: (i % (W / 2)) * 2 + (i / (W / 2)) * LBO + (k % 8) * W + (k / 8) * SBO
// A swizzled operand must start inside the first row of its swizzle pattern (pattern of 8 W-byte rows, on a
// multiple of 8 W bytes): descriptors built here have base offset 0. Advancing K within a swizzled row is
// done by adding the byte offset of the K position to the start address (e.g. + 32 bytes per k16 step,
// K-major).
#pragma once

// By tree path (NVRTC finds no header relative to another); a kernel outside the tree includes these two
// first, by its own path, which skips the lines below.
#ifndef LAB_MMA_CUH
#include "common/lab_mma.cuh"
#endif
#ifndef LAB_SWIZZLE_CUH
#include "common/lab_swizzle.cuh"
#endif

// The N of one m64nNk16 shape: a multiple of 8 up to 256; these eight are instantiable (176 and 192: key
// tiles of the Hopper attention forward). (lab_emu_wgmma.hpp defines it again, identically.)
#define LAB_WGMMA_VALID_N(N) \
  ((N) == 8 || (N) == 16 || (N) == 32 || (N) == 64 || (N) == 128 || (N) == 176 || (N) == 192 || (N) == 256)

// The 8-bit input type of the k32 products (after LAB_F16 0 and LAB_BF16 1 of lab_mma.cuh; lab_emu_wgmma.hpp
// defines it again, identically).
#define LAB_E4M3 2
// Float storage read by the tensor cores as tf32 (k8 products); lab_emu_wgmma.hpp defines it again.
#define LAB_F32 3

#if !defined(LAB_CPU_EMULATOR)

// Two floats to e4m3 (round to nearest even, finite values beyond 448 and infinities saturate to +-448, NaN
// stays NaN), `lo` in the low byte.
__device__ __forceinline__ uint16_t lab_e4m3x2(float lo, float hi) {
  uint16_t r;
  asm("cvt.rn.satfinite.e4m3x2.f32 %0, %1, %2;" : "=h"(r) : "f"(hi), "f"(lo));
  return r;
}
// An e4m3 value as float (exact).
__device__ __forceinline__ float lab_e4m3_to_float(unsigned char bits) {
  uint32_t pair;
  asm("cvt.rn.f16x2.e4m3x2 %0, %1;" : "=r"(pair) : "h"(uint16_t(bits)));
  return lab_to_float<LAB_F16>(uint16_t(pair));
}

// The descriptor of a matrix at `start` (shared memory, 16-byte aligned) with the leading / stride byte
// offsets and swizzle mode LAB_SWIZZLE_* (layouts above).
__device__ __forceinline__ unsigned long long lab_wgmma_desc(const void* start, unsigned leading_bytes,
                                                             unsigned stride_bytes, int swizzle) {
  return lab_wgmma_desc_bits(lab_smem_address(start), leading_bytes, stride_bytes, swizzle);
}

// Orders this thread's earlier register accesses before the following wgmma (wgmma.fence).
__device__ __forceinline__ void lab_wgmma_fence() {
  asm volatile("wgmma.fence.sync.aligned;" ::: "memory");
}
// Closes a group of the wgmma products issued since the last commit.
__device__ __forceinline__ void lab_wgmma_commit_group() {
  asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory");
}
// Waits until at most PENDING committed groups are unfinished.
template <int PENDING>
__device__ __forceinline__ void lab_wgmma_wait_group() {
  asm volatile("wgmma.wait_group.sync.aligned %0;" ::"n"(PENDING) : "memory");
}
// Makes this thread's ordinary shared-memory writes visible to the async proxy (wgmma operands, TMA stores);
// before the barrier that publishes them.
__device__ __forceinline__ void lab_fence_proxy_async_shared() {
  asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
}
// Raises / lowers this warpgroup's register limit to R per thread (R a multiple of 8 in [24, 256]); takes
// effect only in a kernel with a register cap (__launch_bounds__(threads, 1)).
template <int R>
__device__ __forceinline__ void lab_setmaxnreg_inc() {
  asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;" ::"n"(R));
}
template <int R>
__device__ __forceinline__ void lab_setmaxnreg_dec() {
  asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;" ::"n"(R));
}
// Tells the compiler the accumulators are read and rewritten here, so it neither moves their reads before a
// wait nor their last writes after a wgmma (CUTLASS calls this warpgroup_fence_operand).
template <int COUNT>
__device__ __forceinline__ void lab_wgmma_hold(float (&d)[COUNT]) {
#pragma unroll
  for (int i = 0; i < COUNT; ++i) asm volatile("" : "+f"(d[i])::"memory");
}

// The accumulator operand lists: "%0, ..., %(N/2 - 1)" and "+f"(d[0]), ... for m64nNk16.
#define LAB_WGMMA_D8 "%0, %1, %2, %3"
#define LAB_WGMMA_D16 LAB_WGMMA_D8 ", %4, %5, %6, %7"
#define LAB_WGMMA_D32 LAB_WGMMA_D16 ", %8, %9, %10, %11, %12, %13, %14, %15"
#define LAB_WGMMA_D64 \
  LAB_WGMMA_D32 ", %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31"
#define LAB_WGMMA_D128                                                                          \
  LAB_WGMMA_D64                                                                                 \
      ", %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, " \
      "%49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63"
#define LAB_WGMMA_D176                                                                          \
  LAB_WGMMA_D128                                                                                \
      ", %64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, %80, " \
      "%81, %82, %83, %84, %85, %86, %87"
#define LAB_WGMMA_D192 LAB_WGMMA_D176 ", %88, %89, %90, %91, %92, %93, %94, %95"
#define LAB_WGMMA_D256                                                                          \
  LAB_WGMMA_D128                                                                                \
      ", %64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, %80, " \
      "%81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95, %96, %97, "   \
      "%98, %99, %100, %101, %102, %103, %104, %105, %106, %107, %108, %109, %110, %111, "      \
      "%112, %113, %114, %115, %116, %117, %118, %119, %120, %121, %122, %123, %124, %125, "    \
      "%126, %127"
#define LAB_WGMMA_OUT4(o) "+f"(d[o]), "+f"(d[o + 1]), "+f"(d[o + 2]), "+f"(d[o + 3])
#define LAB_WGMMA_OUT8(o) LAB_WGMMA_OUT4(o), LAB_WGMMA_OUT4(o + 4)
#define LAB_WGMMA_OUT16(o) LAB_WGMMA_OUT8(o), LAB_WGMMA_OUT8(o + 8)
#define LAB_WGMMA_OUT32(o) LAB_WGMMA_OUT16(o), LAB_WGMMA_OUT16(o + 16)
#define LAB_WGMMA_OUT64(o) LAB_WGMMA_OUT32(o), LAB_WGMMA_OUT32(o + 32)
#define LAB_WGMMA_OUT88(o) LAB_WGMMA_OUT64(o), LAB_WGMMA_OUT16(o + 64), LAB_WGMMA_OUT8(o + 80)
#define LAB_WGMMA_OUT96(o) LAB_WGMMA_OUT64(o), LAB_WGMMA_OUT32(o + 64)
#define LAB_WGMMA_OUT128(o) LAB_WGMMA_OUT64(o), LAB_WGMMA_OUT64(o + 64)

// The instruction text of one shape and input type; I0.. are the operand numbers after the N / 2 outputs.
// SS: %I0 desc_a, %I1 desc_b, %I2 scale_d, %I3 trans_a, %I4 trans_b.
#define LAB_WGMMA_SS_TEXT(N, TYPE, D, I0, I1, I2, I3, I4)                                               \
  "{\n.reg .pred p;\nsetp.ne.b32 p, %" #I2 ", 0;\nwgmma.mma_async.sync.aligned.m64n" #N "k16.f32." TYPE \
  "." TYPE " {" D "}, %" #I0 ", %" #I1 ", p, 1, 1, %" #I3 ", %" #I4 ";\n}\n"
// RS: %I0..%I3 the A fragment, %I4 desc_b, %I5 scale_d, %I6 trans_b.
#define LAB_WGMMA_RS_TEXT(N, TYPE, D, I0, I1, I2, I3, I4, I5, I6)                                       \
  "{\n.reg .pred p;\nsetp.ne.b32 p, %" #I5 ", 0;\nwgmma.mma_async.sync.aligned.m64n" #N "k16.f32." TYPE \
  "." TYPE " {" D "}, {%" #I0 ", %" #I1 ", %" #I2 ", %" #I3 "}, %" #I4 ", p, 1, 1, %" #I6 ";\n}\n"
// The K-major-only forms (e4m3 m64nNk32, tf32 m64nNk8: no transpose operands): SS %I0 desc_a, %I1 desc_b,
// %I2 scale_d; RS (e4m3) %I0..%I3 the A fragment, %I4 desc_b, %I5 scale_d.
#define LAB_WGMMA_SS_K_MAJOR_TEXT(N, SHAPE_K, TYPE, D, I0, I1, I2)                        \
  "{\n.reg .pred p;\nsetp.ne.b32 p, %" #I2 ", 0;\nwgmma.mma_async.sync.aligned.m64n" #N \
  SHAPE_K ".f32." TYPE "." TYPE " {" D "}, %" #I0 ", %" #I1 ", p, 1, 1;\n}\n"
#define LAB_WGMMA_RS_E4M3_TEXT(N, D, I0, I1, I2, I3, I4, I5)                                     \
  "{\n.reg .pred p;\nsetp.ne.b32 p, %" #I5 ", 0;\nwgmma.mma_async.sync.aligned.m64n" #N        \
  "k32.f32.e4m3.e4m3 {" D "}, {%" #I0 ", %" #I1 ", %" #I2 ", %" #I3 "}, %" #I4 ", p, 1, 1;\n}\n"

template <int N>
struct LabWgmmaShape;

// One shape: its SS and RS products for the 16-bit input types (k16) and e4m3 (k32), SS for tf32 (k8).
#define LAB_WGMMA_SHAPE(N, D, OUT, I0, I1, I2, I3, I4, I5, I6)                                             \
  template <>                                                                                              \
  struct LabWgmmaShape<N> {                                                                                \
    template <int DT, int TRANS_A, int TRANS_B>                                                            \
    static __device__ __forceinline__ void ss(float (&d)[N / 2], unsigned long long desc_a,                \
                                              unsigned long long desc_b, int scale_d) {                    \
      if (DT == LAB_F16)                                                                                   \
        asm volatile(LAB_WGMMA_SS_TEXT(N, "f16", D, I0, I1, I2, I3, I4)                                    \
                     : OUT                                                                                 \
                     : "l"(desc_a), "l"(desc_b), "r"(scale_d), "n"(TRANS_A), "n"(TRANS_B)                  \
                     : "memory");                                                                          \
      else if (DT == LAB_E4M3)                                                                             \
        asm volatile(LAB_WGMMA_SS_K_MAJOR_TEXT(N, "k32", "e4m3", D, I0, I1, I2)                            \
                     : OUT                                                                                 \
                     : "l"(desc_a), "l"(desc_b), "r"(scale_d)                                              \
                     : "memory");                                                                          \
      else if (DT == LAB_F32)                                                                              \
        asm volatile(LAB_WGMMA_SS_K_MAJOR_TEXT(N, "k8", "tf32", D, I0, I1, I2)                             \
                     : OUT                                                                                 \
                     : "l"(desc_a), "l"(desc_b), "r"(scale_d)                                              \
                     : "memory");                                                                          \
      else                                                                                                 \
        asm volatile(LAB_WGMMA_SS_TEXT(N, "bf16", D, I0, I1, I2, I3, I4)                                   \
                     : OUT                                                                                 \
                     : "l"(desc_a), "l"(desc_b), "r"(scale_d), "n"(TRANS_A), "n"(TRANS_B)                  \
                     : "memory");                                                                          \
    }                                                                                                      \
    template <int DT, int TRANS_B>                                                                         \
    static __device__ __forceinline__ void rs(float (&d)[N / 2], const uint32_t (&a)[4],                   \
                                              unsigned long long desc_b, int scale_d) {                    \
      if (DT == LAB_F16)                                                                                   \
        asm volatile(LAB_WGMMA_RS_TEXT(N, "f16", D, I0, I1, I2, I3, I4, I5, I6)                            \
                     : OUT                                                                                 \
                     : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc_b), "r"(scale_d), "n"(TRANS_B) \
                     : "memory");                                                                          \
      else if (DT == LAB_E4M3)                                                                             \
        asm volatile(LAB_WGMMA_RS_E4M3_TEXT(N, D, I0, I1, I2, I3, I4, I5)                                  \
                     : OUT                                                                                 \
                     : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc_b), "r"(scale_d)               \
                     : "memory");                                                                          \
      else                                                                                                 \
        asm volatile(LAB_WGMMA_RS_TEXT(N, "bf16", D, I0, I1, I2, I3, I4, I5, I6)                           \
                     : OUT                                                                                 \
                     : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc_b), "r"(scale_d), "n"(TRANS_B) \
                     : "memory");                                                                          \
    }                                                                                                      \
  };

LAB_WGMMA_SHAPE(8, LAB_WGMMA_D8, LAB_WGMMA_OUT4(0), 4, 5, 6, 7, 8, 9, 10)
LAB_WGMMA_SHAPE(16, LAB_WGMMA_D16, LAB_WGMMA_OUT8(0), 8, 9, 10, 11, 12, 13, 14)
LAB_WGMMA_SHAPE(32, LAB_WGMMA_D32, LAB_WGMMA_OUT16(0), 16, 17, 18, 19, 20, 21, 22)
LAB_WGMMA_SHAPE(64, LAB_WGMMA_D64, LAB_WGMMA_OUT32(0), 32, 33, 34, 35, 36, 37, 38)
LAB_WGMMA_SHAPE(128, LAB_WGMMA_D128, LAB_WGMMA_OUT64(0), 64, 65, 66, 67, 68, 69, 70)
LAB_WGMMA_SHAPE(176, LAB_WGMMA_D176, LAB_WGMMA_OUT88(0), 88, 89, 90, 91, 92, 93, 94)
LAB_WGMMA_SHAPE(192, LAB_WGMMA_D192, LAB_WGMMA_OUT96(0), 96, 97, 98, 99, 100, 101, 102)
LAB_WGMMA_SHAPE(256, LAB_WGMMA_D256, LAB_WGMMA_OUT128(0), 128, 129, 130, 131, 132, 133, 134)

// d (+)= A * B with A and B in shared memory; TRANS_A / TRANS_B: 0 K-major, 1 MN-major; scale_d 0 ignores
// d's previous value (D = A * B).
template <int DT, int N, int TRANS_A, int TRANS_B>
__device__ __forceinline__ void lab_wgmma_ss(float (&d)[N / 2], unsigned long long desc_a,
                                             unsigned long long desc_b, int scale_d) {
  static_assert(LAB_WGMMA_VALID_N(N), "N is 8, 16, 32, 64, 128, 176, 192 or 256");
  static_assert(DT != LAB_E4M3 || (TRANS_A == 0 && TRANS_B == 0), "e4m3 operands are K-major");
  static_assert(DT != LAB_F32 || (TRANS_A == 0 && TRANS_B == 0), "tf32 operands are K-major");
  LabWgmmaShape<N>::template ss<DT, TRANS_A, TRANS_B>(d, desc_a, desc_b, scale_d);
}
// d (+)= A * B with A in registers (layout above), B in shared memory.
template <int DT, int N, int TRANS_B>
__device__ __forceinline__ void lab_wgmma_rs(float (&d)[N / 2], const uint32_t (&a)[4],
                                             unsigned long long desc_b, int scale_d) {
  static_assert(LAB_WGMMA_VALID_N(N), "N is 8, 16, 32, 64, 128, 176, 192 or 256");
  static_assert(DT != LAB_E4M3 || TRANS_B == 0, "e4m3 operands are K-major");
  static_assert(DT != LAB_F32, "tf32 products take A from shared memory (lab_wgmma_ss)");
  LabWgmmaShape<N>::template rs<DT, TRANS_B>(d, a, desc_b, scale_d);
}

#endif  // LAB_CPU_EMULATOR (the emulator defines the same functions in lab_emu_wgmma.hpp)

// Four floats to e4m3, b0 in the low byte.
__device__ __forceinline__ uint32_t lab_e4m3x4(float b0, float b1, float b2, float b3) {
  return uint32_t(lab_e4m3x2(b0, b1)) | uint32_t(lab_e4m3x2(b2, b3)) << 16;
}

// The e4m3 A fragment (RS form) of k32 chunk C of an accumulator d[COUNT] (COUNT / 2 columns, COUNT >= 16 C +
// 16), each value multiplied by `scale` before rounding: the P operand of P V from S's accumulators. The
// A layout (above) wants columns 4q..4q+3 of each 16 from thread q, which holds 2q, 2q+1, 2q+8, 2q+9: the
// fragment keeps them, so its k index 16 b + 4 q + r stands for column 32 C + 16 b + lab_e4m3_p_column(4 q +
// r), and B's K rows (V's keys) must be stored in that order.
template <int C, int COUNT>
__device__ __forceinline__ void lab_wgmma_e4m3_a_from_accumulators(uint32_t (&a)[4], const float (&d)[COUNT],
                                                                   float scale) {
  static_assert(COUNT >= 16 * C + 16, "chunk C lies inside the accumulators");
  const float* x = d + 16 * C;
#pragma unroll
  for (int r = 0; r < 4; ++r) {  // a[r]: row g + 8 (r % 2), k half r / 2
    const int i = 8 * (r / 2) + 2 * (r % 2);
    a[r] = lab_e4m3x4(x[i] * scale, x[i + 1] * scale, x[i + 4] * scale, x[i + 5] * scale);
  }
}
// The column (within 16) that k index j (within 16) of lab_wgmma_e4m3_a_from_accumulators's fragment holds.
__host__ __device__ __forceinline__ constexpr int lab_e4m3_p_column(int j) {
  return 2 * (j / 4) + j % 2 + 8 * (j % 4 / 2);
}
