// NVRTC compilation (no GPU needed): cache hit / miss / corruption, header-sensitive keys, name expressions,
// compile-error diagnostics with file:line:col (also inside included headers), SHA-256 vectors.
#include <catch2/catch.hpp>

#include <cstdlib>

#include "nvrtc_runtime/cuda_compiler.hpp"
#include "nvrtc_runtime/diagnostics.hpp"
#include "nvrtc_runtime/sha256.hpp"
#include "tests/test_helpers.hpp"

using namespace lab;
namespace fs = std::filesystem;

namespace {

const char* kTemplateKernel = R"(// scale kernels for the tests
#include "common/util.cuh"
template <int N>
__global__ void scale_by(float* x, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] = times<N>(x[i]);
}
)";
const char* kHeader = "template <int N> __device__ float times(float v) { return v * N; }\n";

CompileRequest scale_request() {
  return {"scale.cu", {}, {"scale_by<4>", "scale_by<8>"}};
}

}  // namespace

TEST_CASE("sha256 matches the FIPS 180-4 test vectors", "[runtime]") {
  CHECK(sha256_hex("abc") == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  CHECK(sha256_hex("") == "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  CHECK(sha256_hex("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq") ==
        "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
}

TEST_CASE("template kernels compile by name expression with distinct lowered names", "[runtime]") {
  test::ScratchDir dir("names");
  test::write_file(dir.path / "k/scale.cu", kTemplateKernel);
  test::write_file(dir.path / "k/common/util.cuh", kHeader);
  auto tree = KernelTree::from_directory(dir.path / "k");
  DiskCache cache(dir.path / "cache");
  CompileResult r = compile_with_nvrtc(*tree, cache, scale_request(), "sm_90");
  REQUIRE(r.lowered_names.size() == 2);
  CHECK(r.lowered_names[0].rfind("_Z", 0) == 0);
  CHECK(r.lowered_names[0] != r.lowered_names[1]);
  CHECK(r.ptx.find(r.lowered_names[1]) != std::string::npos);
  REQUIRE(r.resources.size() == 2);
  CHECK(r.resources[0].registers.value_or(0) > 0);
  CHECK(r.resources[1].spill_stores.has_value());
}

TEST_CASE("the compile cache hits, keys on headers, and recompiles corrupt entries", "[runtime]") {
  test::ScratchDir dir("cache");
  test::write_file(dir.path / "k/scale.cu", kTemplateKernel);
  test::write_file(dir.path / "k/common/util.cuh", kHeader);
  auto tree = KernelTree::from_directory(dir.path / "k");
  DiskCache cache(dir.path / "cache");

  CompileResult first = compile_with_nvrtc(*tree, cache, scale_request(), "sm_90");
  CHECK_FALSE(first.cache_hit);
  CompileResult second = compile_with_nvrtc(*tree, cache, scale_request(), "sm_90");
  CHECK(second.cache_hit);
  CHECK(second.binary == first.binary);
  CHECK(second.lowered_names == first.lowered_names);
  CHECK(cache.list().size() == 1);

  SECTION("a different target or define is a different entry") {
    CHECK_FALSE(compile_with_nvrtc(*tree, cache, scale_request(), "sm_80").cache_hit);
    CompileRequest with_define = scale_request();
    with_define.defines.push_back("EXTRA=1");
    CHECK_FALSE(compile_with_nvrtc(*tree, cache, with_define, "sm_90").cache_hit);
  }
  SECTION("editing an included header misses") {
    test::write_file(dir.path / "k/common/util.cuh",
                     "template <int N> __device__ float times(float v) { return v * N + 1; }\n");
    CHECK_FALSE(compile_with_nvrtc(*tree, cache, scale_request(), "sm_90").cache_hit);
  }
  SECTION("a truncated entry is detected, removed and recompiled") {
    fs::path entry = cache.path_of(first.cache_key);
    fs::resize_file(entry, fs::file_size(entry) / 2);
    std::string note;
    CompileResult again = compile_with_nvrtc(*tree, cache, scale_request(), "sm_90", &note);
    CHECK_FALSE(again.cache_hit);
    CHECK(note.find("corrupt cache entry") != std::string::npos);
    CHECK(again.binary == first.binary);
    CHECK(compile_with_nvrtc(*tree, cache, scale_request(), "sm_90").cache_hit);
  }
  SECTION("a flipped byte is detected by the checksum") {
    fs::path entry = cache.path_of(first.cache_key);
    std::fstream f(entry, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(std::streamoff(fs::file_size(entry) / 2));
    char c = 0;
    f.read(&c, 1);
    f.seekp(std::streamoff(fs::file_size(entry) / 2));
    c = char(c ^ 0x5a);
    f.write(&c, 1);
    f.close();
    std::string note;
    CHECK_FALSE(compile_with_nvrtc(*tree, cache, scale_request(), "sm_90", &note).cache_hit);
    CHECK(note.find("checksum") != std::string::npos);
  }
  SECTION("clear removes every entry") {
    CHECK(cache.clear().removed == 1);
    CHECK(cache.list().empty());
  }
}

TEST_CASE("LAB_CACHE_DIR overrides the cache location", "[runtime]") {
  ::setenv("LAB_CACHE_DIR", "/tmp/lab-cache-env-test", 1);
  CHECK(DiskCache::from_environment().root() == fs::path("/tmp/lab-cache-env-test"));
  ::unsetenv("LAB_CACHE_DIR");
  ::setenv("XDG_CACHE_HOME", "/tmp/xdg-test", 1);
  CHECK(DiskCache::from_environment().root() == fs::path("/tmp/xdg-test/yolo26-lab"));
  ::unsetenv("XDG_CACHE_HOME");
}

TEST_CASE("compile errors carry file, line, column and message", "[runtime]") {
  test::ScratchDir dir("diag");
  test::write_file(dir.path / "k/broken.cu",
                   "// line 1\n#include \"common/bad.cuh\"\n\nextern \"C\" __global__ void k(float* x) {\n"
                   "  x[0] = undefined_name;\n}\n");
  test::write_file(dir.path / "k/common/bad.cuh",
                   "// header line 1\n__device__ int f() { return missing_too; }\n");
  auto tree = KernelTree::from_directory(dir.path / "k");
  DiskCache cache(dir.path / "cache");
  try {
    compile_with_nvrtc(*tree, cache, {"broken.cu", {}, {"k"}}, "sm_90");
    FAIL("the broken kernel compiled");
  } catch (const CompileError& e) {
    REQUIRE(e.diagnostics.size() >= 2);
    bool in_header = false, in_main = false;
    for (auto& d : e.diagnostics) {
      if (d.file == "common/bad.cuh" && d.line == 2 && d.column == 29 && d.severity == "error")
        in_header = true;
      if (d.file == "broken.cu" && d.line == 5 && d.column == 10 &&
          d.message.find("undefined_name") != std::string::npos)
        in_main = true;
    }
    CHECK(in_header);  // column 29: "__device__ int f() { return " is 28 characters
    CHECK(in_main);
    std::string text = e.what();
    CHECK(text.find("broken.cu:5:10: error:") != std::string::npos);
    CHECK(text.find("x[0] = undefined_name;") != std::string::npos);  // the offending source line
  }
}

TEST_CASE("compiler logs of both formats parse", "[runtime]") {
  auto d = parse_compiler_log(
      "/tmp/tree/attention/fa.cu:12:7: error: 'q' was not declared\n"
      "common/lab.cuh(30): warning: unused\n",
      "/tmp/tree/");
  REQUIRE(d.size() == 2);
  CHECK(d[0].file == "attention/fa.cu");
  CHECK(d[0].line == 12);
  CHECK(d[0].column == 7);
  CHECK(d[0].severity == "error");
  CHECK(d[1].file == "common/lab.cuh");
  CHECK(d[1].line == 30);
  CHECK(d[1].severity == "warning");
  CHECK(has_errors(d));
}

TEST_CASE("SASS runs nvdisasm from PATH on the cubin", "[runtime]") {
  test::ScratchDir dir("sass");
  test::write_file(dir.path / "k/scale.cu", kTemplateKernel);
  test::write_file(dir.path / "k/common/util.cuh", kHeader);
  auto tree = KernelTree::from_directory(dir.path / "k");
  DiskCache cache(dir.path / "cache");
  CompileResult r = compile_with_nvrtc(*tree, cache, scale_request(), "sm_90");
  // A stand-in nvdisasm that proves it was handed the cubin: it prints its flags and the file's size.
  test::write_file(dir.path / "bin/nvdisasm",
                   "#!/bin/sh\necho \"disassembled $1 $2 $(wc -c < \"$3\") bytes\"\n");
  fs::permissions(dir.path / "bin/nvdisasm", fs::perms::owner_all);
  const std::string old_path = std::getenv("PATH");
  ::setenv("PATH", (dir.path.string() + "/bin:" + old_path).c_str(), 1);
  std::string sass = disassemble_sass(r);
  ::setenv("PATH", old_path.c_str(), 1);
  CHECK(sass == "disassembled -c -g " + std::to_string(r.binary.size()) + " bytes\n");
}
