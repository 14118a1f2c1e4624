// A kernel that faults on the GPU is reported with its name, and a new cuda backend made afterwards resets
// the device and runs kernels again (the viewer relies on this after a broken edit). The cpu twin of the
// fault report is in test_emulator_errors.cpp.
#include <catch2/catch.hpp>

#include "backend.hpp"
#include "errors.hpp"
#include "kernel_tree.hpp"
#include "runner.hpp"
#include "test_helpers.hpp"

using namespace lab;
using Catch::Matchers::Contains;

TEST_CASE("after a kernel faults on the GPU a new cuda backend resets the device and runs again", "[gpu]") {
  LAB_REQUIRE_GPU_OR_SKIP();
  test::ScratchDir cache("cuda-fault");
  {
    auto backend = make_backend(
        "cuda", test::make_context(KernelTree::from_directory(LAB_TEST_KERNELS_DIR), cache.path));
    DeviceBuffer out = backend->alloc_array<float>(32);
    float* out_ptr = out.as<float>();
    int n = 32, offset = 1 << 30;  // 4 GiB past a 128-byte buffer: an illegal address
    auto module = backend->compile({"faults.cu", {}, {"write_with_offset"}});
    std::string message;
    try {
      backend->launch(module->kernel("write_with_offset"), {{1, 1, 1}, {32, 1, 1}},
                      kernel_args(out_ptr, n, offset));
      backend->synchronize();
    } catch (const RuntimeError& e) {
      message = e.what();
    }
    INFO(message);
    CHECK_THAT(message, Contains("write_with_offset"));
  }
  auto fresh = make_backend("cuda", test::embedded_context());
  const Runner& runner = Registry::instance().get("detect_decode");
  auto instance = runner.instantiate(*fresh, "v1_fused", resolve_params(runner, {}), 5);
  instance->launch();
  for (const OutputCheck& c : instance->check(std::nullopt)) CHECK(c.pass);
}
