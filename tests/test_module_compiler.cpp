// One --verbose line per module: a module that Backend::precompile compiled is logged then, and the compile()
// that loads it from the cache afterwards writes no second line ("lab: module X: cache miss" followed by
// "lab: compile ... X: cache hit" was the old pair); modules compiled without precompile are logged as before.
#include <catch2/catch.hpp>

#include <algorithm>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "nvrtc_runtime/compile_log.hpp"
#include "nvrtc_runtime/module_compiler.hpp"
#include "tests/test_emulator_support.hpp"

using namespace lab;

namespace {

// The --verbose lines written while it lives.
struct VerboseLines {
  VerboseLines() {
    set_verbose_sink([this](const std::string& line) { lines.push_back(line); });
  }
  ~VerboseLines() { set_verbose_sink({}); }
  std::vector<std::string> lines;
};

bool has(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

}  // namespace

TEST_CASE("ModuleCompiler logs each module once: precompile's compile, not the loads after it",
          "[runtime]") {
  // A stand-in compile over a stand-in cache: the first compile of a source misses, every later one hits.
  std::mutex mutex;
  std::set<std::string> cached;
  auto compile = [&](const CompileRequest& request, std::string*) {
    CompileResult result;
    result.backend = "fake";
    result.target = "t1";
    result.cache_key = "key-" + request.source_path;
    std::lock_guard lock(mutex);
    result.cache_hit = !cached.insert(result.cache_key).second;
    return result;
  };
  RuntimeOptions options;
  options.verbose = true;
  ModuleCompiler modules(options, compile, [](const CompileRequest& r) { return "cc " + r.source_path; });
  const CompileRequest a{"a.cu", {}, {"ka"}}, b{"b.cu", {}, {"kb1", "kb2"}}, c{"c.cu", {}, {"kc"}};

  VerboseLines log;
  modules.precompile({a, b});
  REQUIRE(log.lines.size() == 2);
  std::sort(log.lines.begin(), log.lines.end());
  CHECK(has(log.lines[0], "compile fake t1 a.cu (1 kernel): cache miss, "));
  CHECK(has(log.lines[0], " ms: cc a.cu"));
  CHECK(has(log.lines[1], "compile fake t1 b.cu (2 kernels): cache miss, "));

  CHECK(modules.compile(a).cache_hit);
  CHECK(modules.compile(b).cache_hit);
  CHECK(modules.compile(a).cache_hit);  // a second op loading the same module
  modules.precompile({a});              // a later forward's precompile
  CHECK(log.lines.size() == 2);         // loads of what precompile compiled write nothing

  CHECK_FALSE(modules.compile(c).cache_hit);  // never precompiled: each compile is logged, miss then hit
  CHECK(modules.compile(c).cache_hit);
  REQUIRE(log.lines.size() == 4);
  CHECK(has(log.lines[2], "compile fake t1 c.cu (1 kernel): cache miss, "));
  CHECK(has(log.lines[3], "compile fake t1 c.cu (1 kernel): cache hit, "));
}

TEST_CASE("cpu backend -v: a precompiled module is one compile line, and loads and runs from the cache",
          "[runtime][emulator]") {
  test::ScratchDir dir("verbose-precompile");
  test::write_file(dir.path / "k" / "fill.cu",
                   "extern \"C\" __global__ void fill(float* x) { x[threadIdx.x] = 1.0f; }\n");
  RuntimeContext context = test::make_context(KernelTree::from_directory(dir.path / "k"), dir.path / "cache");
  context.options.verbose = true;
  auto backend = make_backend("cpu", context);
  const CompileRequest request{"fill.cu", {}, {"fill"}};

  VerboseLines log;
  backend->precompile({request});
  auto module = backend->compile(request);
  CHECK(module->result().cache_hit);
  REQUIRE(log.lines.size() == 1);
  CHECK(has(log.lines[0], "compile cpu "));
  CHECK(has(log.lines[0], " fill.cu (1 kernel): cache miss, "));
  CHECK(has(log.lines[0], "lab_emu_wrapper.cpp"));

  DeviceBuffer out = test::poisoned_floats(*backend, 1);
  void* out_ptr = out.get();
  backend->launch(module->kernel("fill"), {{1, 1, 1}, {1, 1, 1}}, kernel_args(out_ptr));
  CHECK(backend->download_vector<float>(out, 1)[0] == 1.0f);
}
