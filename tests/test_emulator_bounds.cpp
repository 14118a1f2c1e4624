// Out-of-bounds accesses on the cpu emulator: with --check-bounds an access at any offset from a buffer
// (one float past its end to 10M floats past, or before its start) fails the launch naming the kernel, the
// thread, the buffer (by the kernel argument that points into it) and the offset, even with other buffers
// allocated on both sides; without it, a fault is still a one-line error naming the kernel, never a signal
// that kills the process.
#include <catch2/catch.hpp>

#include <cstdio>

#include "nvrtc_runtime/errors.hpp"
#include "tests/test_emulator_support.hpp"

using namespace lab;
using Catch::Matchers::Contains;

namespace {

std::string address_text(const void* p) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%p", p);
  return buf;
}

// Launches one block of 32 threads of write_at(out, index) or read_at(in, index, result) from bounds.cu and
// returns the RuntimeError's message ("" if none).
struct FaultLauncher {
  Backend& backend;
  std::shared_ptr<Module> module = backend.compile({"bounds.cu", {}, {"write_at", "read_at"}});

  std::string write(DeviceBuffer& out, long long index) {
    void* ptr = out.get();
    return launch("write_at", kernel_args(ptr, index));
  }
  std::string read(DeviceBuffer& in, long long index, DeviceBuffer& result) {
    void* in_ptr = in.get();
    void* result_ptr = result.get();
    return launch("read_at", kernel_args(in_ptr, index, result_ptr));
  }
  std::string launch(const std::string& kernel, const KernelArgs& args) {
    try {
      backend.launch(module->kernel(kernel), {{1, 1, 1}, {32, 1, 1}}, args);
    } catch (const RuntimeError& e) {
      return e.what();
    }
    return {};
  }
};

}  // namespace

TEST_CASE("emulator: --check-bounds attributes an access at any offset to the buffer it missed", "[emulator]") {
  auto backend = test::emulator_backend(/*check_bounds=*/true);
  FaultLauncher launcher{*backend};
  // Neighbours on both sides: with small guards a far access would land in (or be blamed on) one of them.
  DeviceBuffer below = backend->alloc_array<float>(1000);
  DeviceBuffer out = backend->alloc_array<float>(1000);
  DeviceBuffer above = backend->alloc_array<float>(1000);
  DeviceBuffer result = backend->alloc_array<float>(1);
  const std::string buffer = "a 4000-byte buffer at " + address_text(out.get());
  const std::string written = buffer + " (argument 0 (float*))";
  const std::string prefix = "block (0,0,0): thread (0,0,0): out-of-bounds access: ";

  struct Case {
    long long index;
    std::string expected;
  };
  const std::vector<Case> writes = {
      {1000, "byte 4000 of " + written + ", 0 bytes past its end"},
      {1001, "byte 4004 of " + written + ", 4 bytes past its end"},
      {1000 + 256, "byte 5024 of " + written + ", 1024 bytes past its end"},
      {1000 + 2048, "byte 12192 of " + written + ", 8192 bytes past its end"},
      {1000 + 1000000, "byte 4004000 of " + written + ", 4000000 bytes past its end"},
      {1000 + (1LL << 31), "byte 8589938592 of " + written + ", 8589934592 bytes past its end"},
      {-2048, "8192 bytes before the start of " + written},
      {-(1LL << 31), "8589934592 bytes before the start of " + written},
  };
  for (const Case& c : writes) {
    INFO("out[" << c.index << "] = 1");
    CHECK_THAT(launcher.write(out, c.index), Contains("kernel write_at " + prefix + c.expected));
  }
  INFO("result[0] = in[10M past the end]");
  CHECK_THAT(launcher.read(out, 1000 + 10000000, result),
             Contains("kernel read_at " + prefix + "byte 40004000 of " + buffer +
                      " (argument 0 (const float*)), 40000000 bytes past its end"));
  // The bytes of the first page before the buffer's start are readable; a write there is caught by its canary.
  CHECK_THAT(launcher.write(out, -1),
             Contains("kernel write_at wrote up to 4 bytes before the start of a 4000-byte buffer (" +
                      address_text(out.get())));
  // In bounds, after all those failed launches: clean, and the buffers are intact.
  DeviceBuffer fresh = backend->alloc_array<float>(1000);
  CHECK(launcher.write(fresh, 999).empty());
  CHECK(backend->download_vector<float>(fresh, 1000)[999] == 1.0f);
}

TEST_CASE("emulator: --check-bounds holds the live buffers of a training pass", "[emulator]") {
  // yolo26n's training pass at batch 2 holds about 1,400 buffers at once; the arena is laid out for 4,096.
  auto backend = test::emulator_backend(/*check_bounds=*/true);
  std::vector<DeviceBuffer> live;
  for (int i = 0; i < 3000; ++i) live.push_back(backend->alloc_array<float>(1 + i % 7));
  DeviceBuffer last = backend->alloc_array<float>(8);
  FaultLauncher launcher{*backend};
  CHECK(launcher.write(last, 7).empty());
  CHECK_THAT(launcher.write(last, 8), Contains("byte 32 of a 32-byte buffer"));
}

TEST_CASE("emulator: without --check-bounds a memory fault fails the launch with one line naming the kernel",
          "[emulator]") {
  auto backend = test::emulator_backend(/*check_bounds=*/false);
  FaultLauncher launcher{*backend};
  DeviceBuffer out = backend->alloc_array<float>(1000);
  DeviceBuffer result = backend->alloc_array<float>(1);
  // 1 TiB before a heap block: nothing is mapped there.
  const std::string far_write = launcher.write(out, -(1LL << 38));
  INFO(far_write);
  CHECK_THAT(far_write,
             Contains("kernel write_at block (0,0,0): thread (0,0,0): invalid memory access: address 0x"));
  CHECK_THAT(far_write, Contains("(run with --check-bounds to find the buffer it missed)"));
  CHECK(far_write.find('\n') == std::string::npos);
  // 128 TiB past: beyond the canonical address range of 48-bit x86-64, where the processor reports no address.
  CHECK_THAT(launcher.read(out, 1LL << 45, result),
             Contains("kernel read_at block (0,0,0): thread (0,0,0): invalid memory access: "));
  DeviceBuffer null_buffer;
  CHECK_THAT(launcher.write(null_buffer, 2),
             Contains("kernel write_at block (0,0,0): thread (0,0,0): invalid memory access: a null pointer "
                      "(address 0x8)"));
  CHECK(launcher.write(out, 999).empty());
  CHECK(backend->download_vector<float>(out, 1000)[999] == 1.0f);
}
