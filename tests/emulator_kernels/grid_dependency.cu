// Emulator test kernels: Programmatic Dependent Launch (common/lab_grid_dependency.cuh), a producer and a
// dependent consumer, run as a chain inside a captured graph by tests/test_programmatic_launch.cpp.
//
// grid_dependency_produce(data, busy, n, value): lets its dependents launch first thing, then works a while
//   (a chain of multiply-adds kept in busy[i], so a dependent launched early really runs beside it), then
//   writes data[i] = value + i.
// grid_dependency_consume(data, n, out): launched with LaunchConfig::programmatic_dependent; waits for its
//   prerequisite grids, then copies out[i] = data[i] (what it saw of the producer's writes).
#include "../../kernels/common/lab.cuh"
#include "../../kernels/common/lab_grid_dependency.cuh"

__global__ void grid_dependency_produce(int* data, unsigned* busy, int n, int value) {
  lab_launch_dependents();
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  unsigned chain = unsigned(value + i);
  for (int k = 0; k < 4000; ++k) chain = chain * 1664525u + 1013904223u;
  busy[i] = chain;
  data[i] = value + i;
}

__global__ void grid_dependency_consume(const int* data, int n, int* out) {
  lab_grid_dependency_wait();
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = data[i];
}
