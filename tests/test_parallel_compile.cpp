// compile_in_parallel: modules compile side by side (seen by the most compiles in flight at once, not by
// timing), every request is compiled once, and a failure is rethrown only after the others have finished.
#include <catch2/catch.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "nvrtc_runtime/parallel_compile.hpp"

using namespace lab;

namespace {

std::vector<CompileRequest> requests(int n) {
  std::vector<CompileRequest> r;
  for (int i = 0; i < n; ++i) r.push_back(CompileRequest{"module" + std::to_string(i) + ".cu", {}, {"k"}});
  return r;
}

}  // namespace

TEST_CASE("compile_in_parallel compiles the modules side by side, each once", "[runtime]") {
  if (std::thread::hardware_concurrency() < 2) {
    WARN("skipped: one hardware thread");
    return;
  }
  std::atomic<int> in_flight{0}, most{0};
  std::mutex m;
  std::vector<std::string> compiled;
  compile_in_parallel(
      requests(4),
      [&](const CompileRequest& r) {
        const int now = ++in_flight;
        for (int seen = most; now > seen && !most.compare_exchange_weak(seen, now);) {
        }
        // Hold on until a second compile has started (bounded: a serial loop fails the check below).
        const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
        while (most < 2 && std::chrono::steady_clock::now() < deadline)
          std::this_thread::sleep_for(std::chrono::milliseconds(1));
        --in_flight;
        std::lock_guard lock(m);
        compiled.push_back(r.source_path);
        return CompileResult{};
      },
      false);
  CHECK(most >= 2);
  std::sort(compiled.begin(), compiled.end());
  CHECK(compiled == std::vector<std::string>{"module0.cu", "module1.cu", "module2.cu", "module3.cu"});
}

TEST_CASE("compile_in_parallel rethrows the first failure after every compile has finished", "[runtime]") {
  std::atomic<int> finished{0};
  auto run = [&] {
    compile_in_parallel(
        requests(5),
        [&](const CompileRequest& r) {
          if (r.source_path == "module1.cu" || r.source_path == "module3.cu")
            throw CompileError(r.source_path + ": error", {}, "");
          ++finished;
          return CompileResult{};
        },
        false);
  };
  CHECK_THROWS_WITH(run(), "module1.cu: error");
  CHECK(finished == 3);
}
