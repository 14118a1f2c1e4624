// run_rank_threads: one thread per local rank; the first failure aborts its communicator and is rethrown.
#include "pipeline/distributed/rank_threads.hpp"

#include <exception>
#include <mutex>
#include <string>
#include <thread>

namespace lab {
namespace {

std::string message_of(const std::exception_ptr& error) {
  try {
    std::rethrow_exception(error);
  } catch (const std::exception& e) {
    return e.what();
  } catch (...) {
    return "unknown exception";
  }
}

}  // namespace

void run_rank_threads(const std::vector<Communicator*>& communicators, const std::function<void(int)>& body) {
  std::mutex mutex;
  std::exception_ptr first;
  std::vector<std::thread> threads;
  threads.reserve(communicators.size());
  for (size_t i = 0; i < communicators.size(); ++i) {
    threads.emplace_back([&, i] {
      try {
        body(int(i));
      } catch (...) {
        const std::exception_ptr error = std::current_exception();
        {
          std::lock_guard<std::mutex> lock(mutex);
          if (!first) first = error;
        }
        communicators[i]->abort(message_of(error));
      }
    });
  }
  for (std::thread& t : threads) t.join();
  if (first) std::rethrow_exception(first);
}

}  // namespace lab
