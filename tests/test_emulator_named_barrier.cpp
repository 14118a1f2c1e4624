// Named barriers (common/lab_named_barrier.cuh) on the emulator (lab_emu_named_barrier.hpp): two warpgroups
// taking turns as the wgmma attention consumers do, the expected order computed here from the PTX ISA's
// rules, and the emulator's errors (deadlock, counts, ids). The [gpu] twin runs the same kernel on cuda.
#include <catch2/catch.hpp>

#include "nvrtc_runtime/cuda_compiler.hpp"
#include "nvrtc_runtime/errors.hpp"
#include "tests/test_emulator_support.hpp"

using namespace lab;
using Catch::Matchers::Contains;

namespace {

std::vector<int> turns(Backend& backend, int rounds) {
  auto module = backend.compile({"named_barriers.cu", {}, {"named_barrier_turns"}});
  DeviceBuffer out = backend.upload_vector(std::vector<int>(size_t(rounds) * 256, -1));
  void* out_ptr = out.get();
  backend.launch(module->kernel("named_barrier_turns"), {{1, 1, 1}, {256, 1, 1}}, kernel_args(out_ptr, rounds));
  backend.synchronize();
  return backend.download_vector<int>(out, size_t(rounds) * 256);
}

// Warpgroup w's round r is turn 2 r + w for every one of its threads.
void check_turns(const std::vector<int>& seen, int rounds) {
  for (int w = 0; w < 2; ++w)
    for (int r = 0; r < rounds; ++r)
      for (int t = 0; t < 128; ++t) {
        INFO("warpgroup " << w << " round " << r << " thread " << t);
        CHECK(seen[size_t((w * rounds + r) * 128 + t)] == 2 * r + w);
      }
}

std::string misuse_error(Backend& backend, int mode) {
  auto module = backend.compile({"named_barriers.cu", {}, {"named_barrier_misuse"}});
  try {
    backend.launch(module->kernel("named_barrier_misuse"), {{1, 1, 1}, {64, 1, 1}}, kernel_args(mode));
  } catch (const RuntimeError& e) {
    return e.what();
  }
  return {};
}

}  // namespace

TEST_CASE("emulator: warpgroups take turns on named barriers in the order the PTX ISA gives", "[emulator]") {
  auto backend = test::emulator_backend();
  check_turns(turns(*backend, 6), 6);
}

TEST_CASE("emulator: named barrier deadlocks and misuse end the launch at the line", "[emulator]") {
  auto backend = test::emulator_backend();
  std::string message = misuse_error(*backend, 0);
  INFO(message);
  CHECK_THAT(message, Contains("barrier deadlock: every thread of the block waits and no mbarrier or named "
                               "barrier it waits on can change: threads 0-31 wait at named barrier 1 ("));
  CHECK_THAT(message, Contains("named_barriers.cu:34) with 32 of 64 threads arrived; threads 32-63 have exited"));
  CHECK_THAT(misuse_error(*backend, 1),
             Contains("named_barriers.cu:36: named barrier 1: count 48 is not a multiple of 32 in 32..64"));
  CHECK_THAT(misuse_error(*backend, 2),
             Contains("named_barriers.cu:38: named barrier id must be 1..15 (0 is __syncthreads')"));
  CHECK_THAT(misuse_error(*backend, 3),
             Contains("named_barriers.cu:40: named barrier 2 used with counts 64 and 32 in one phase"));
}

TEST_CASE("lab_named_barrier.cuh compiles with NVRTC to bar.sync and bar.arrive (no GPU needed)",
          "[emulator]") {
  const RuntimeContext ctx = test::emulator_kernels_context();
  const CompileResult r =
      compile_with_nvrtc(*ctx.tree, *ctx.cache, {"named_barriers.cu", {}, {"named_barrier_turns"}}, "sm_90");
  CHECK_THAT(r.ptx, Contains("bar.sync"));
  CHECK_THAT(r.ptx, Contains("bar.arrive"));
}

TEST_CASE("named barrier turns on the GPU match the expectations and the emulator", "[emulator][gpu]") {
  LAB_REQUIRE_GPU_OR_SKIP();
  auto gpu = make_backend("cuda", test::emulator_kernels_context());
  auto cpu = test::emulator_backend();
  const std::vector<int> seen = turns(*gpu, 6);
  check_turns(seen, 6);
  CHECK(seen == turns(*cpu, 6));
}
