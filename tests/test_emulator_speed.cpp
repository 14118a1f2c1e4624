// Emulator speed probes, hidden from the default run (`lab_tests "[.emulator-speed]"`): prints the wall time
// of a 1024-thread block doing 10 __syncthreads and of a 10,000-block grid of 256 threads with no barriers.
#include <catch2/catch.hpp>

#include <iostream>

#include "tests/test_emulator_support.hpp"

using namespace lab;

TEST_CASE("emulator speed: barriers and plain fibers", "[.emulator-speed]") {
  auto backend = test::emulator_backend();
  auto module = backend->compile({"emulator_speed.cu", {}, {"sync_loop", "touch_once"}});
  DeviceBuffer out = backend->alloc_array<float>(10000 * 256);
  void* ptr = out.get();

  int rounds = 10;
  auto sync_block = [&] {
    backend->launch(module->kernel("sync_loop"), {{1, 1, 1}, {1024, 1, 1}}, kernel_args(ptr, rounds));
  };
  sync_block();  // warm: maps the fiber stacks
  double best_sync = 1e9;
  for (int i = 0; i < 5; ++i) best_sync = std::min(best_sync, backend->time_ms(sync_block));
  CHECK(backend->download_vector<float>(out, 1024)[1023] == 10230.0f);

  int n = 10000 * 256;
  auto big_grid = [&] {
    backend->launch(module->kernel("touch_once"), {{10000, 1, 1}, {256, 1, 1}}, kernel_args(ptr, n));
  };
  big_grid();
  double best_grid = 1e9;
  for (int i = 0; i < 3; ++i) best_grid = std::min(best_grid, backend->time_ms(big_grid));
  CHECK(backend->download_vector<float>(out, size_t(n))[size_t(n) - 1] == float(n - 1));

  std::cout << "emulator on " << backend->device().name
            << ": 1 block x 1024 threads x 10 __syncthreads: " << best_sync
            << " ms; 10000 blocks x 256 threads, no barrier: " << best_grid << " ms (" << best_grid * 1e6 / n
            << " ns per thread)\n";
}
