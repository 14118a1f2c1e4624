// Emulator test kernel: kernels/common/lab_swizzle.cuh compiled as a kernel sees it, on every backend.
//
// swizzle_table: out[(mode * 8 + row) * 8 + chunk] = lab_swizzle_chunk(mode, row, chunk) for the four modes,
//   rows 0-7 and chunks 0-7 (chunks past a mode's row are left out: out = 0xffffffff). Block 256.
// On the cpu backend the emulator's own copy ("lab_swizzle.cuh" among its headers, what its models use) is
// included as well: the include guard must make the two copies one.
#include "../../kernels/common/lab.cuh"
#include "../../kernels/common/lab_swizzle.cuh"
#if defined(LAB_CPU_EMULATOR)
#include "lab_swizzle.cuh"
#endif

extern "C" __global__ void swizzle_table(unsigned* out) {
  const unsigned i = threadIdx.x, mode = i / 64, row = i / 8 % 8, chunk = i % 8;
  out[i] =
      chunk < lab_swizzle_row_bytes(int(mode)) / 16 ? lab_swizzle_chunk(int(mode), row, chunk) : 0xffffffffu;
}
