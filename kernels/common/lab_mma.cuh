// Half-precision storage and the warp-level tensor-core primitives (PTX mma.sync m16n8k16 and tf32 m16n8k8,
// ldmatrix, cp.async, and the ex2.approx.ftz exponent their softmax uses) on both backends. NVRTC gets inline
// PTX (sm_80 or newer); the cpu emulator implements the same functions with the same per-lane register
// layouts (nvrtc_runtime/cpu/device/lab_emu_mma.hpp), so a kernel written against the PTX layouts below runs
// unchanged on both.
//
// Element types are template arguments: LAB_F16 (IEEE binary16) or LAB_BF16 (bfloat16). Values travel as raw
// 16-bit patterns (uint16_t) or packed pairs (uint32_t: the element with the lower index in the low half).
//
// Register layouts (PTX ISA, "Matrix fragments for mma.m16n8k16" with .f16/.bf16 operands and .f32
// accumulators); g = lane / 4 (group), t = lane % 4 (thread in group):
//   A 16x16 (row-major), a[4]: a[0] = A[g][2t, 2t+1], a[1] = A[g+8][2t, 2t+1], a[2] = A[g][2t+8, 2t+9],
//                              a[3] = A[g+8][2t+8, 2t+9]
//   B 16x8 (k x n),      b[2]: b[0] = B[2t, 2t+1][g], b[1] = B[2t+8, 2t+9][g]
//   C/D 16x8 float,      d[4]: d[0..1] = D[g][2t, 2t+1], d[2..3] = D[g+8][2t, 2t+1]
// tf32 (m16n8k8 with .tf32 operands, one element per 32-bit register, and .f32 accumulators):
//   A 16x8 (row-major),  a[4]: a[0] = A[g][t], a[1] = A[g+8][t], a[2] = A[g][t+4], a[3] = A[g+8][t+4]
//   B 8x8 (k x n),       b[2]: b[0] = B[t][g], b[1] = B[t+4][g]
//   C/D 16x8 float,      d[4]: as m16n8k16
// A tf32 operand is a float bit pattern whose low 13 mantissa bits are zero (lab_to_tf32); 3xTF32
// (lab_split_tf32, lab_mma_1688_3xtf32) keeps float32 accuracy by adding the products of the low parts.
// ldmatrix (8x8 matrices of 16-bit elements, each row 16 contiguous bytes in shared memory): lanes 8i..8i+7
// give the row addresses of matrix i (x4: i < 4, x2: i < 2, lanes 0-15; the other lanes' addresses are
// ignored); r[i] receives matrix i as M[g][2t, 2t+1], or with .trans as M[2t][g] (low) and M[2t+1][g] (high).
#pragma once
#define LAB_MMA_CUH

#if !defined(LAB_CPU_EMULATOR)
// NVRTC has no <stdint.h>; the emulator gets the standard one through <cstdint>.
typedef unsigned short uint16_t;
typedef unsigned int uint32_t;
#endif

// Element types; the cpu emulator's lab_emu_mma.hpp (included first) defines both identically.
#define LAB_F16 0
#define LAB_BF16 1

#if !defined(LAB_CPU_EMULATOR)

// Rounds two floats to nearest even and packs them: `lo` in bits 0-15.
template <int DT>
__device__ __forceinline__ uint32_t lab_pack2(float lo, float hi) {
  uint32_t r;
  if (DT == LAB_F16)
    asm("cvt.rn.f16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo));
  else
    asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo));
  return r;
}

// One 16-bit pattern to float (exact).
template <int DT>
__device__ __forceinline__ float lab_to_float(uint16_t bits) {
  if (DT == LAB_BF16) return __uint_as_float(uint32_t(bits) << 16);
  float f;
  asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(bits));
  return f;
}

// d += a * b, one m16n8k16 tensor-core product with float accumulation (layouts above).
template <int DT>
__device__ __forceinline__ void lab_mma_16816(float (&d)[4], const uint32_t (&a)[4], const uint32_t (&b)[2]) {
  if (DT == LAB_F16)
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
        "{%0,%1,%2,%3};"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
  else
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
        "{%0,%1,%2,%3};"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}

__device__ __forceinline__ uint32_t lab_smem_address(const void* p) {
  return uint32_t(__cvta_generic_to_shared(p));
}

// Four 8x8 matrices from shared memory; `row` is this lane's row address (see above).
__device__ __forceinline__ void lab_ldmatrix_x4(uint32_t (&r)[4], const void* row) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(lab_smem_address(row)));
}
__device__ __forceinline__ void lab_ldmatrix_x4_trans(uint32_t (&r)[4], const void* row) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(lab_smem_address(row)));
}
__device__ __forceinline__ void lab_ldmatrix_x2(uint32_t (&r)[2], const void* row) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x2.shared.b16 {%0,%1}, [%2];"
               : "=r"(r[0]), "=r"(r[1])
               : "r"(lab_smem_address(row)));
}
__device__ __forceinline__ void lab_ldmatrix_x2_trans(uint32_t (&r)[2], const void* row) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x2.trans.shared.b16 {%0,%1}, [%2];"
               : "=r"(r[0]), "=r"(r[1])
               : "r"(lab_smem_address(row)));
}

// 16 bytes global -> shared without passing through registers; when `valid` is false the 16 bytes are
// zero-filled and `src` is not read. Completes at lab_cp_async_wait (then __syncthreads for other threads).
__device__ __forceinline__ void lab_cp_async_16(void* dst, const void* src, bool valid) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" ::"r"(lab_smem_address(dst)), "l"(src),
               "r"(valid ? 16 : 0));
}
// Closes the group of cp.async issued since the last commit.
__device__ __forceinline__ void lab_cp_async_commit() {
  asm volatile("cp.async.commit_group;");
}
// Waits until at most PENDING committed groups are still in flight.
template <int PENDING>
__device__ __forceinline__ void lab_cp_async_wait() {
  asm volatile("cp.async.wait_group %0;" ::"n"(PENDING));
}

// x rounded to tf32 (10 mantissa bits, to nearest, ties away from zero: cvt.rna), as a float bit pattern.
__device__ __forceinline__ uint32_t lab_to_tf32(float x) {
  uint32_t r;
  asm("cvt.rna.tf32.f32 %0, %1;" : "=r"(r) : "f"(x));
  return r;
}

// d += a * b, one m16n8k8 tensor-core product of tf32 operands with float accumulation (layouts above).
__device__ __forceinline__ void lab_mma_1688_tf32(float (&d)[4], const uint32_t (&a)[4],
                                                  const uint32_t (&b)[2]) {
  asm volatile(
      "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
      "{%0,%1,%2,%3};"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}

// 2^x in one MUFU instruction (ex2.approx, ~2 ulp), results below the smallest normal float flushed to zero:
// the softmax exponent, which exp2f would follow with subnormal fix-ups.
__device__ __forceinline__ float lab_exp2_ftz(float x) {
  float r;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(r) : "f"(x));
  return r;
}

#endif  // LAB_CPU_EMULATOR (the emulator defines the same functions in lab_emu_mma.hpp)

// The first 1024-byte boundary of shared memory at or after `raw` (dynamic shared memory, whose start CUDA only
// aligns to 16 bytes): where TMA boxes in the 128-byte swizzle and wgmma operands begin, since the swizzle
// pattern repeats every 1024 bytes of shared-memory address. Both backends (lab_smem_address is the emulator's
// there).
__device__ __forceinline__ unsigned char* lab_smem_align_1024(unsigned char* raw) {
  return raw + (1024u - lab_smem_address(raw) % 1024u) % 1024u;
}

// Fragments from shared tiles of 16-bit elements with LD elements per row (LD * 2 bytes a multiple of 16; an
// LD of 8 more than a multiple of 64 puts the eight rows of each ldmatrix in distinct banks).

// A operand (16 x 16, row-major) at rows row0.., columns col0.. of a tile.
template <int LD>
__device__ __forceinline__ void lab_load_a(uint32_t (&a)[4], const uint16_t* tile, int row0, int col0,
                                           int lane) {
  lab_ldmatrix_x4(a, tile + (row0 + lane % 16) * LD + col0 + (lane / 16) * 8);
}

// B operands of two n8 tiles (n0 and n0 + 8) for the k16 chunk at k0, from a tile whose rows are the n index
// and whose columns the reduction index: b[0..1] for n0, b[2..3] for n0 + 8.
template <int LD>
__device__ __forceinline__ void lab_load_b_rows_n(uint32_t (&b)[4], const uint16_t* tile, int n0, int k0,
                                                  int lane) {
  lab_ldmatrix_x4(b, tile + (n0 + lane % 8 + (lane / 16) * 8) * LD + k0 + ((lane / 8) % 2) * 8);
}

// The same two n8 tiles from a tile whose rows are the reduction index: transposed loads.
template <int LD>
__device__ __forceinline__ void lab_load_b_rows_k(uint32_t (&b)[4], const uint16_t* tile, int n0, int k0,
                                                  int lane) {
  lab_ldmatrix_x4_trans(b, tile + (k0 + lane % 8 + ((lane / 8) % 2) * 8) * LD + n0 + (lane / 16) * 8);
}

// d0 += a * (b[0], b[1]) and d1 += a * (b[2], b[3]): the products of one A fragment with the two n8 tiles of
// one lab_load_b_rows_n / lab_load_b_rows_k.
template <int DT>
__device__ __forceinline__ void lab_mma_16816_pair(float (&d0)[4], float (&d1)[4], const uint32_t (&a)[4],
                                                   const uint32_t (&b)[4]) {
  lab_mma_16816<DT>(d0, a, {b[0], b[1]});
  lab_mma_16816<DT>(d1, a, {b[2], b[3]});
}

// 3xTF32: x = hi + lo + e with hi = tf32(x), lo = tf32(x - hi), |e| <= 2^-22 |x| (about float32's own
// rounding); a product a b is hi_a hi_b + hi_a lo_b + lo_a hi_b, leaving out lo_a lo_b (<= 2^-22 |a b|).
__device__ __forceinline__ void lab_split_tf32(float x, uint32_t& hi, uint32_t& lo) {
  hi = lab_to_tf32(x);
  lo = lab_to_tf32(x - __uint_as_float(hi));
}

// d += a * b in 3xTF32 from split operands: the two small products first, then the large one.
__device__ __forceinline__ void lab_mma_1688_3xtf32(float (&d)[4], const uint32_t (&a_hi)[4],
                                                    const uint32_t (&a_lo)[4], const uint32_t (&b_hi)[2],
                                                    const uint32_t (&b_lo)[2]) {
  lab_mma_1688_tf32(d, a_lo, b_hi);
  lab_mma_1688_tf32(d, a_hi, b_lo);
  lab_mma_1688_tf32(d, a_hi, b_hi);
}
