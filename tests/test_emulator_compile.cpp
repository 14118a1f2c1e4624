// The cpu backend's compile step: template kernels by name expression, defines, the content-addressed cache
// (hit on the second compile, miss on an edited header), and host-compiler errors reported as tree-relative
// file:line diagnostics.
#include <catch2/catch.hpp>

#include "tests/test_emulator_support.hpp"

using namespace lab;
using Catch::Matchers::Contains;

namespace {

const char* kScaleKernel = R"(// scale kernels for the emulator compile tests
#include "common/util.cuh"
template <int N>
__global__ void scale_by(float* x, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] = times<N>(x[i]) + OFFSET;
}
)";
const char* kHeader = "template <int N> __device__ float times(float v) { return v * N; }\n";

std::vector<float> run_scale(Backend& backend, const std::string& name_expression,
                             const std::vector<std::string>& defines) {
  auto module = backend.compile({"scale.cu", defines, {name_expression}});
  std::vector<float> host = {1.0f, 2.0f, 3.0f};
  DeviceBuffer x = backend.upload_vector(host);
  void* ptr = x.get();
  int n = 3;
  backend.launch(module->kernel(name_expression), {{1, 1, 1}, {32, 1, 1}}, kernel_args(ptr, n));
  return backend.download_vector<float>(x, 3);
}

}  // namespace

TEST_CASE("emulator compile: template instances, defines, and the cache", "[emulator]") {
  test::ScratchDir dir("emu-compile");
  test::write_file(dir.path / "k/scale.cu", kScaleKernel);
  test::write_file(dir.path / "k/common/util.cuh", kHeader);
  auto backend =
      make_backend("cpu", test::make_context(KernelTree::from_directory(dir.path / "k"), dir.path / "cache"));
  CHECK_THAT(backend->device().name, Contains("host CPU ("));

  CHECK(run_scale(*backend, "scale_by<4>", {"OFFSET=0.5f"}) == std::vector<float>{4.5f, 8.5f, 12.5f});
  CHECK(run_scale(*backend, "scale_by<8>", {"OFFSET=0"}) == std::vector<float>{8.0f, 16.0f, 24.0f});

  const CompileRequest request{"scale.cu", {"OFFSET=1"}, {"scale_by<2>", "scale_by<3>"}};
  auto first = backend->compile(request);
  CHECK_FALSE(first->result().cache_hit);
  CHECK(first->result().backend == "cpu");
  CHECK(first->result().resources.size() == 2);
  auto second = backend->compile(request);
  CHECK(second->result().cache_hit);
  CHECK(second->result().cache_key == first->result().cache_key);
  CHECK(second->result().binary == first->result().binary);
  // Both modules stay usable side by side.
  CHECK(run_scale(*backend, "scale_by<2>", {"OFFSET=1"}) == std::vector<float>{3.0f, 5.0f, 7.0f});

  test::write_file(dir.path / "k/common/util.cuh",
                   "template <int N> __device__ float times(float v) { return v * N - 1; }\n");
  CHECK_FALSE(backend->compile(request)->result().cache_hit);
  CHECK(run_scale(*backend, "scale_by<2>", {"OFFSET=1"}) == std::vector<float>{2.0f, 4.0f, 6.0f});
}

TEST_CASE("emulator compile: host-compiler errors point at tree-relative file:line", "[emulator]") {
  test::ScratchDir dir("emu-error");
  test::write_file(dir.path / "k/bad.cu",
                   "#include \"common/helper.cuh\"\n"
                   "extern \"C\" __global__ void bad(float* x) {\n"
                   "  x[0] = undeclared_name;\n"
                   "}\n");
  test::write_file(dir.path / "k/common/helper.cuh", "// helper\n__device__ float ok() { return 1.0f; }\n");
  test::write_file(dir.path / "k/bad_header.cu", "#include \"common/broken.cuh\"\n");
  test::write_file(dir.path / "k/common/broken.cuh", "// broken\n\n__device__ float broken() { return }\n");
  auto backend =
      make_backend("cpu", test::make_context(KernelTree::from_directory(dir.path / "k"), dir.path / "cache"));

  try {
    backend->compile({"bad.cu", {}, {"bad"}});
    FAIL("the compile should have failed");
  } catch (const CompileError& e) {
    INFO(e.what());
    REQUIRE_FALSE(e.diagnostics.empty());
    CHECK(e.diagnostics[0].file == "bad.cu");
    CHECK(e.diagnostics[0].line == 3);
    CHECK(e.diagnostics[0].severity == "error");
    CHECK_THAT(std::string(e.what()), Contains("bad.cu:3:10: error: 'undeclared_name' was not declared"));
  }
  try {
    backend->compile({"bad_header.cu", {}, {}});
    FAIL("the compile should have failed");
  } catch (const CompileError& e) {
    INFO(e.what());
    REQUIRE_FALSE(e.diagnostics.empty());
    CHECK(e.diagnostics[0].file == "common/broken.cuh");
    CHECK(e.diagnostics[0].line == 3);
  }
  try {
    backend->compile({"bad.cu", {"undeclared_name=1.0f"}, {"missing_kernel"}});
    FAIL("the compile should have failed");
  } catch (const CompileError& e) {
    CHECK_THAT(std::string(e.what()), Contains("missing_kernel"));
  }
}
