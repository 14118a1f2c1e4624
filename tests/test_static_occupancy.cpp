// The static occupancy calculator against cases worked by hand from the sm_90 / sm_86 limits (CUDA C++
// Programming Guide table; registers allocated 256 per warp over 4 sub-partitions, shared memory in 128-byte
// units plus 1 KiB reserved per block), and on a GPU against cudaOccupancyMaxActiveBlocksPerMultiprocessor
// for every kernel of every runner at several block sizes.
#include <catch2/catch.hpp>

#include "kernels/runner.hpp"
#include "harness/resources.hpp"
#include "harness/scenario_runner.hpp"
#include "nvrtc_runtime/cuda_compiler.hpp"
#include "nvrtc_runtime/static_occupancy.hpp"
#include "tests/test_helpers.hpp"

namespace {

lab::StaticOccupancy on(const std::string& arch, int registers, int shared, int threads, int max_threads = 0) {
  const std::optional<lab::ArchLimits> limits = lab::arch_limits(arch);
  REQUIRE(limits);
  return lab::static_occupancy(*limits, registers, shared, threads, max_threads);
}

void check(const lab::StaticOccupancy& o, int blocks, int warps, const std::string& limited_by) {
  CHECK(o.blocks_per_sm == blocks);
  CHECK(o.active_warps == warps);
  CHECK(o.limited_by == limited_by);
}

}  // namespace

TEST_CASE("static occupancy: hand-computed cases on sm_90 and sm_86", "[occupancy]") {
  // 32 regs x 32 lanes = 1024 per warp: 16 warps per 16384-register sub-partition, 64 per SM = 8 blocks of
  // 8 warps, which is also the 64-warp limit (ties name the warps).
  check(on("sm_90", 32, 0, 256), 8, 64, "warps");
  // 128 regs: 4096 per warp, 4 warps per sub-partition, 16 per SM: 2 blocks of 256 threads.
  check(on("sm_90", 128, 0, 256), 2, 16, "registers");
  // 40 regs: 1280 per warp; 16384 / 1280 = 12 warps per sub-partition, 48 per SM: 24 blocks of 2 warps (the
  // SM's 65536 / 1280 = 51 warps would wrongly give 25).
  check(on("sm_90", 40, 0, 64), 24, 48, "registers");
  // 40000 B static + 1024 reserved = 41024, rounded to 41088: 233472 / 41088 = 5 blocks of 4 warps.
  check(on("sm_90", 32, 40000, 128), 5, 20, "shared memory");
  // 1 register, 32 threads: 64 warps would fit, the SM holds 32 blocks.
  check(on("sm_90", 1, 0, 32), 32, 32, "blocks");
  // 255 regs -> 8192 per warp, 2 warps per sub-partition: one block of 8 warps.
  check(on("sm_90", 255, 0, 256), 1, 8, "registers");
  // 65 regs x 1024 threads: 2304 x 32 warps = 73728 registers > 65536 per block: it cannot launch.
  check(on("sm_90", 65, 0, 1024), 0, 0, "registers per block");
  check(on("sm_90", 32, 0, 256, 128), 0, 0, "block size above the kernel's 128 threads");
  check(on("sm_90", 32, 228 * 1024, 32), 0, 0, "shared memory per block");
  // sm_86: 48 warps per SM, 16 blocks: 6 blocks of 8 warps.
  check(on("sm_86", 32, 0, 256), 6, 48, "warps");
  CHECK_FALSE(lab::arch_limits("sm_42"));
}

TEST_CASE("static occupancy agrees with cudaOccupancyMaxActiveBlocksPerMultiprocessor", "[gpu][occupancy]") {
  LAB_REQUIRE_GPU_OR_SKIP();
  const std::string arch = lab::default_cuda_arch();
  INFO("the static limits table needs an entry for this GPU's " << arch);
  REQUIRE(lab::arch_limits(arch));
  lab::RuntimeContext ctx = lab::test::embedded_context();
  lab::BackendSet backends(ctx);
  lab::Backend& cuda = backends.get("cuda");
  int compared = 0;
  for (const lab::Runner* runner : lab::Registry::instance().all()) {
    const lab::CompileRequest request =
        runner->compile_request(runner->variants().front().name, lab::resolve_params(*runner, {}));
    std::shared_ptr<lab::Module> module = cuda.compile(request);
    const lab::CompileResult& result = module->result();
    for (size_t i = 0; i < request.name_expressions.size(); ++i) {
      const lab::ResourceUsage& usage = result.resources[i];
      for (int threads : {32, 64, 96, 128, 256, 512, 1024}) {
        if (threads > usage.max_threads_per_block.value_or(1024)) continue;
        const int runtime = cuda.occupancy_blocks_per_sm(module->kernel(request.name_expressions[i]), threads, 0);
        const std::optional<lab::StaticOccupancy> computed = lab::occupancy_of(usage, arch, threads);
        REQUIRE(computed);
        INFO(request.name_expressions[i] << " at " << threads << " threads, " << usage.registers.value_or(0)
                                         << " registers, " << usage.static_shared_bytes.value_or(0) << " B shared");
        CHECK(usage.registers.has_value());
        CHECK(computed->blocks_per_sm == runtime);
        ++compared;
      }
    }
  }
  CHECK(compared > 50);
}
