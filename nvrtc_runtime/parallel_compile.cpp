// compile_in_parallel: a shared work index over the requests, one worker thread per hardware thread.
#include "nvrtc_runtime/parallel_compile.hpp"

#include <algorithm>
#include <atomic>
#include <exception>
#include <mutex>
#include <thread>

namespace lab {
namespace {

std::mutex& progress_mutex() {
  static std::mutex m;
  return m;
}

CompileProgress& progress_hook() {
  static CompileProgress hook;
  return hook;
}

}  // namespace

void set_compile_progress(CompileProgress progress) {
  std::lock_guard lock(progress_mutex());
  progress_hook() = std::move(progress);
}

void compile_in_parallel(const std::vector<CompileRequest>& requests,
                         const std::function<CompileResult(const CompileRequest&)>& compile_one, bool verbose) {
  std::vector<std::exception_ptr> errors(requests.size());
  std::atomic<size_t> next{0};
  size_t done = 0;
  auto work = [&] {
    for (size_t i = next++; i < requests.size(); i = next++) {
      try {
        compile_one(requests[i]);
      } catch (...) {
        errors[i] = std::current_exception();
      }
      std::lock_guard lock(progress_mutex());
      ++done;
      if (!verbose && progress_hook()) progress_hook()(done, requests.size(), requests[i].source_path);
    }
  };
  const size_t threads = std::min<size_t>(requests.size(), std::max(1u, std::thread::hardware_concurrency()));
  std::vector<std::thread> pool;
  for (size_t t = 1; t < threads; ++t) pool.emplace_back(work);
  work();
  for (std::thread& t : pool) t.join();
  for (const std::exception_ptr& e : errors)
    if (e) std::rethrow_exception(e);
}

}  // namespace lab
