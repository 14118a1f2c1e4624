// What the cpu emulator reports instead of hanging or crashing: barrier divergence, threads exiting before a
// barrier, warp collectives that never complete, out-of-bounds accesses in --check-bounds mode, device
// asserts, and launch arguments that do not match the kernel's parameters. Every error names the kernel.
#include <catch2/catch.hpp>

#include <chrono>

#include "nvrtc_runtime/errors.hpp"
#include "tests/test_emulator_support.hpp"

using namespace lab;
using Catch::Matchers::Contains;

namespace {

// Launches `kernel` of faults.cu on one block and returns the RuntimeError's message ("" if none).
template <class... A>
std::string launch_error(Backend& backend, const std::string& kernel, unsigned threads, A&... args) {
  auto module = backend.compile({"faults.cu", {}, {kernel}});
  try {
    backend.launch(module->kernel(kernel), {{1, 1, 1}, {threads, 1, 1}}, kernel_args(args...));
  } catch (const RuntimeError& e) {
    return e.what();
  }
  return {};
}

}  // namespace

TEST_CASE("emulator: a divergent barrier is an error naming kernel, block and lines, within a second",
          "[emulator]") {
  auto backend = test::emulator_backend();
  DeviceBuffer out = test::poisoned_floats(*backend, 256);
  void* out_ptr = out.get();
  int split = 100;
  backend->compile({"faults.cu", {}, {"divergent_barrier"}});  // compile outside the timed part
  const auto t0 = std::chrono::steady_clock::now();
  const std::string message = launch_error(*backend, "divergent_barrier", 256, out_ptr, split);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  INFO(message);
  CHECK(seconds < 1.0);
  CHECK_THAT(message, Contains("kernel divergent_barrier block (0,0,0): barrier divergence at faults.cu:13"));
  CHECK_THAT(message, Contains("threads 0-99 wait at __syncthreads (faults.cu:13)"));
  CHECK_THAT(message, Contains("threads 100-255 wait at __syncthreads (faults.cu:15)"));
  // The backend stays usable after an aborted launch.
  split = 256;
  CHECK(launch_error(*backend, "divergent_barrier", 256, out_ptr, split).empty());
}

TEST_CASE("emulator: threads exiting while others wait at a barrier is an error", "[emulator]") {
  auto backend = test::emulator_backend();
  DeviceBuffer out = test::poisoned_floats(*backend, 64);
  void* out_ptr = out.get();
  int limit = 40;
  const std::string message = launch_error(*backend, "exit_before_barrier", 64, out_ptr, limit);
  INFO(message);
  CHECK_THAT(message,
             Contains("kernel exit_before_barrier block (0,0,0): barrier divergence at faults.cu:22"));
  CHECK_THAT(message, Contains("threads 40-63 have exited"));
}

TEST_CASE("emulator: a warp collective whose lanes never arrive is an error", "[emulator]") {
  auto backend = test::emulator_backend();
  DeviceBuffer out = test::poisoned_floats(*backend, 64);
  void* out_ptr = out.get();
  const std::string message = launch_error(*backend, "warp_deadlock", 64, out_ptr);
  INFO(message);
  CHECK_THAT(message, Contains("kernel warp_deadlock block (0,0,0): warp collective never completes"));
  CHECK_THAT(message, Contains("__shfl_xor_sync (faults.cu:28, mask 0xffffffff)"));
  CHECK_THAT(message, Contains("threads 1-31 of its mask wait at __syncthreads (faults.cu:29)"));
}

TEST_CASE("emulator: --check-bounds reports an out-of-bounds write naming the kernel", "[emulator]") {
  auto backend = test::emulator_backend(/*check_bounds=*/true);
  auto module = backend->compile({"faults.cu", {}, {"write_with_offset"}});
  auto launch = [&](DeviceBuffer& buffer, int n, int offset) -> std::string {
    void* ptr = buffer.get();
    try {
      backend->launch(module->kernel("write_with_offset"), {{unsigned((n + 63) / 64), 1, 1}, {64, 1, 1}},
                      kernel_args(ptr, n, offset));
    } catch (const RuntimeError& e) {
      return e.what();
    }
    return {};
  };
  SECTION("past the end, into the guard page") {
    DeviceBuffer out = backend->alloc_array<float>(1000);
    const std::string message = launch(out, 1000, 1);
    INFO(message);
    CHECK_THAT(message,
               Contains("kernel write_with_offset block (15,0,0): thread (39,0,0): out-of-bounds access: "
                        "byte 4000 of a 4000-byte buffer"));
  }
  SECTION("into the alignment padding before the guard page (caught by the canary)") {
    DeviceBuffer out = backend->alloc_array<float>(1001);
    const std::string message = launch(out, 1001, 1);
    INFO(message);
    CHECK_THAT(message,
               Contains("kernel write_with_offset wrote up to 4 bytes past the end of a 4004-byte buffer"));
  }
  SECTION("in bounds runs clean, also after a fault") {
    DeviceBuffer bad = backend->alloc_array<float>(100);
    CHECK_FALSE(launch(bad, 100, 3000).empty());
    DeviceBuffer out = backend->alloc_array<float>(1000);
    CHECK(launch(out, 1000, 0).empty());
    CHECK(backend->download_vector<float>(out, 1000)[999] == 1.0f);
  }
  SECTION("host copies are checked too") {
    DeviceBuffer out = backend->alloc_array<float>(10);
    std::vector<float> host(11, 1.0f);
    CHECK_THROWS_WITH(backend->upload(out.get(), host.data(), 44),
                      Contains("upload of 44 bytes at offset 0 overruns a 40-byte buffer"));
  }
}

TEST_CASE("emulator: a failed device assert ends the launch with the condition and line", "[emulator]") {
  auto backend = test::emulator_backend();
  DeviceBuffer in = backend->upload_vector(std::vector<float>{1.0f, 2.0f, -3.0f, 4.0f});
  void* in_ptr = in.get();
  int n = 4;
  const std::string message = launch_error(*backend, "assert_positive", 32, in_ptr, n);
  CHECK_THAT(message, Contains("kernel assert_positive block (0,0,0): thread (2,0,0) at faults.cu:40: "
                               "assertion failed: in[i] > 0.0f"));
}

TEST_CASE("emulator: launch arguments are checked against the kernel's real parameter types", "[emulator]") {
  auto backend = test::emulator_backend();
  auto module = backend->compile({"faults.cu", {}, {"write_with_offset"}});
  DeviceBuffer out = backend->alloc_array<float>(16);
  void* ptr = out.get();
  int n = 16;
  double wrong_offset = 0;
  CHECK_THROWS_WITH(backend->launch(module->kernel("write_with_offset"), {{1, 1, 1}, {16, 1, 1}},
                                    kernel_args(ptr, n, wrong_offset)),
                    Contains("kernel write_with_offset: argument 2 has 8 bytes but parameter 2 (int) has 4"));
  CHECK_THROWS_WITH(
      backend->launch(module->kernel("write_with_offset"), {{1, 1, 1}, {16, 1, 1}}, kernel_args(ptr, n)),
      Contains("kernel write_with_offset takes 3 arguments (float*, int, int) but the launch passes 2"));
  CHECK_THROWS_WITH(
      backend->launch(module->kernel("write_with_offset"), {{1, 1, 1}, {2048, 1, 1}}, kernel_args(ptr, n, n)),
      Contains("invalid block (2048,1,1)"));
  CHECK_THROWS_AS(module->kernel("not_requested"), UsageError);
}
