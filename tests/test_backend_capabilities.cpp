// Backend capabilities are queries each backend answers (has_device_timing, can_capture_graphs,
// runs_arch_specific_kernels), checked here against what each backend observably does: cpu times on the host's
// wall clock and replays a capture by running the recorded work again; cuda replays a captured graph without
// calling the recording function. Both run sm_90a kernels here (the emulator models wgmma / TMA; the [gpu]
// suite's H200 is compute capability 9.0): test_emulator_wgmma and the NHWC network's tests run them.
#include <catch2/catch.hpp>

#include <chrono>
#include <thread>

#include "nvrtc_runtime/runtime_context.hpp"
#include "tests/test_helpers.hpp"

using namespace lab;

TEST_CASE("the cpu backend times on the wall clock and replays a capture by running its work again",
          "[runtime][capabilities]") {
  auto backend = make_backend("cpu", test::embedded_context());
  CHECK_FALSE(backend->has_device_timing());
  CHECK_FALSE(backend->can_capture_graphs());
  CHECK(backend->runs_arch_specific_kernels());

  const double ms = backend->time_ms([] { std::this_thread::sleep_for(std::chrono::milliseconds(30)); });
  CHECK(ms >= 30.0);  // host work with no launch at all is timed: the wall clock

  int runs = 0;
  const std::unique_ptr<LaunchGraph> graph = backend->capture([&] { ++runs; });
  CHECK(runs == 0);
  graph->replay();
  graph->replay();
  CHECK(runs == 2);
}

TEST_CASE("the cuda backend times with device events and replays a captured graph as recorded",
          "[runtime][capabilities][gpu]") {
  LAB_REQUIRE_GPU_OR_SKIP();
  auto backend = make_backend("cuda", test::embedded_context());
  CHECK(backend->has_device_timing());
  CHECK(backend->can_capture_graphs());
  CHECK(backend->runs_arch_specific_kernels() == (backend->device().arch == "sm_90"));

  const size_t bytes = 256;
  DeviceBuffer buffer = backend->alloc(bytes);
  int runs = 0;
  const std::unique_ptr<LaunchGraph> graph = backend->capture([&] {
    ++runs;
    backend->fill_bytes(buffer.get(), 7, bytes);
  });
  CHECK(runs == 1);  // the function ran once, to record its work
  backend->fill_bytes(buffer.get(), 0, bytes);
  graph->replay();
  backend->synchronize();
  CHECK(runs == 1);  // the replay ran the recorded memset, not the function
  const std::vector<uint8_t> host = backend->download_vector<uint8_t>(buffer, bytes);
  CHECK(host == std::vector<uint8_t>(bytes, 7));
}
