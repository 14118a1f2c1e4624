// A launch passes a kernel's parameter struct by value; both backends check its type and size against what
// the compiled entry point takes (the module's own report on cpu, the PTX declaration and mangled name on
// cuda), so a wrong struct is one line naming the kernel, not undefined behaviour.
#include <catch2/catch.hpp>

#include "kernels/detect/detect_decode.hpp"
#include "kernels/detect/detect_decode_params.cuh"
#include "nvrtc_runtime/cuda_compiler.hpp"
#include "nvrtc_runtime/disk_cache.hpp"
#include "nvrtc_runtime/kernel_tree.hpp"
#include "test_helpers.hpp"

using namespace lab;

// At namespace scope so that the error names them plainly (not "{anonymous}::...").
struct SmallWrongParams {  // another struct than the entry's, of another size
  const float* data;
  int count;
};
struct SameSizeWrongParams {  // another struct of the entry's very size
  char bytes[sizeof(DetectDecodeParams)];
};

namespace {

const char* kEntry = "detect_decode_v1_fused";

// Launches detect_decode_v1_fused with `params` on `backend_name`; the error text, or "" when it ran.
template <class P>
std::string launch_error(Backend& backend, const P& params) {
  auto module = backend.compile(detect_decode_spec().compile_request("v1_fused", {}));
  try {
    backend.launch(module->kernel(kEntry), {{1, 1, 1}, {32, 1, 1}}, kernel_params(params));
    backend.synchronize();
  } catch (const std::exception& e) {
    return e.what();
  }
  return "";
}

void check_wrong_structs_rejected(const std::string& backend_name) {
  auto backend = make_backend(backend_name, test::embedded_context());
  const std::string small = launch_error(*backend, SmallWrongParams{nullptr, 0});
  CHECK(small ==
        "kernel detect_decode_v1_fused takes lab::DetectDecodeParams (48 bytes) but the launch passes "
        "SmallWrongParams (16 bytes)");
  const std::string same = launch_error(*backend, SameSizeWrongParams{});
  CHECK(same ==
        "kernel detect_decode_v1_fused takes lab::DetectDecodeParams (48 bytes) but the launch passes "
        "SameSizeWrongParams (48 bytes)");
  // Positional arguments where the entry takes a struct: the count differs.
  auto module = backend->compile(detect_decode_spec().compile_request("v1_fused", {}));
  const float* raw = nullptr;
  int anchors = 0;
  CHECK_THROWS_WITH(
      backend->launch(module->kernel(kEntry), {}, kernel_args(raw, anchors)),
      "kernel detect_decode_v1_fused takes 1 arguments (lab::DetectDecodeParams) but the launch "
      "passes 2");
  // The right struct (anchors = 0: every thread returns at once) runs.
  CHECK(launch_error(*backend, DetectDecodeParams{nullptr, nullptr, nullptr, nullptr, nullptr, 0}).empty());
}

}  // namespace

TEST_CASE("a launch with another parameter struct than the entry's fails naming the kernel on cpu",
          "[launch]") {
  check_wrong_structs_rejected("cpu");
}

TEST_CASE("a launch with another parameter struct than the entry's fails naming the kernel on cuda",
          "[launch][gpu]") {
  LAB_REQUIRE_GPU_OR_SKIP();
  check_wrong_structs_rejected("cuda");
}

TEST_CASE("the cuda entry signature comes from the PTX declaration and the mangled name", "[launch]") {
  // NVRTC needs no GPU: the check the cuda backend runs is exercised on every machine.
  const RuntimeContext context = test::embedded_context();
  const CompileResult r = compile_with_nvrtc(*context.tree, *context.cache,
                                             detect_decode_spec().compile_request("v1_fused", {}), "sm_90");
  const EntrySignature sig = entry_signature_from_ptx(r.ptx, r.lowered_names.at(0));
  CHECK(sig.sizes == std::vector<size_t>{sizeof(DetectDecodeParams)});
  CHECK(sig.types == std::vector<std::string>{"lab::DetectDecodeParams"});
  const SmallWrongParams wrong{nullptr, 0};
  CHECK_THROWS_WITH(
      check_launch_arguments(kEntry, sig, kernel_params(wrong)),
      "kernel detect_decode_v1_fused takes lab::DetectDecodeParams (48 bytes) but the launch passes "
      "SmallWrongParams (16 bytes)");
  const DetectDecodeParams right{};
  CHECK_NOTHROW(check_launch_arguments(kEntry, sig, kernel_params(right)));
  // Scalars: sizes from the .param types, no types for an extern "C" entry.
  const std::string ptx =
      ".visible .entry scalars(\n\t.param .u64 .ptr .align 1 scalars_param_0,\n"
      "\t.param .u32 scalars_param_1,\n\t.param .f64 scalars_param_2\n)\n{\n}\n";
  const EntrySignature scalars = entry_signature_from_ptx(ptx, "scalars");
  CHECK(scalars.sizes == std::vector<size_t>{8, 4, 8});
  CHECK(scalars.types == std::vector<std::string>{"", "", ""});
}
