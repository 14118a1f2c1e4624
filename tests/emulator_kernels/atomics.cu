// Emulator test kernel: atomics from many blocks at once.
//
// atomic_accumulate: in [n] floats in [0, 1) -> sum (float, atomicAdd), count (int, atomicAdd), max_bits
// (int,
//   atomicMax of the float bits: non-negative floats order like their bits), cas_max_bits (the same maximum
//   through an atomicCAS loop), min_index (unsigned, atomicMin of the index of every element above 0.5).
// Grid: ceil(n / blockDim.x); block: any size. Every thread touches every target once.
extern "C" __global__ void atomic_accumulate(const float* __restrict__ in, int n, float* sum, int* count,
                                             int* max_bits, int* cas_max_bits, unsigned* min_index) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  const float v = in[i];
  atomicAdd(sum, v);
  atomicAdd(count, 1);
  atomicMax(max_bits, __float_as_int(v));
  int seen = *cas_max_bits;
  while (__int_as_float(seen) < v) {
    const int previous = atomicCAS(cas_max_bits, seen, __float_as_int(v));
    if (previous == seen) break;
    seen = previous;
  }
  if (v > 0.5f) atomicMin(min_index, unsigned(i));
}
