// parallel_for: std::thread workers pulling indices from a shared atomic counter.
#include "pipeline/reference/parallel_for.hpp"

#include <algorithm>
#include <atomic>
#include <exception>
#include <mutex>
#include <thread>
#include <vector>

namespace lab::reference {

void parallel_for(size_t count, const std::function<void(size_t)>& body) {
  const size_t threads = std::min<size_t>(std::max(1u, std::thread::hardware_concurrency()), count);
  if (threads <= 1) {
    for (size_t i = 0; i < count; ++i) body(i);
    return;
  }
  std::atomic<size_t> next{0};
  std::exception_ptr failure;
  std::mutex failure_mutex;
  auto worker = [&] {
    try {
      for (size_t i = next++; i < count; i = next++) body(i);
    } catch (...) {
      next = count;
      const std::lock_guard<std::mutex> lock(failure_mutex);
      if (!failure) failure = std::current_exception();
    }
  };
  std::vector<std::thread> pool;
  for (size_t t = 1; t < threads; ++t) pool.emplace_back(worker);
  worker();
  for (std::thread& t : pool) t.join();
  if (failure) std::rethrow_exception(failure);
}

}  // namespace lab::reference
