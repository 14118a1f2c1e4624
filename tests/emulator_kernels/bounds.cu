// Emulator test kernels for out-of-bounds accesses at any distance from a buffer.
//
// write_at: thread 0 writes out[index]; read_at: thread 0 copies in[index] to result[0]. `index` is 64-bit, so
// any offset can be reached; a negative one lies before the start.
extern "C" __global__ void write_at(float* out, long long index) {
  if (threadIdx.x == 0) out[index] = 1.0f;
}

extern "C" __global__ void read_at(const float* in, long long index, float* result) {
  if (threadIdx.x == 0) result[0] = in[index];
}
