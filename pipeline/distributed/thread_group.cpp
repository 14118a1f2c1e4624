// ThreadGroup: a generation-counting barrier with a poison message.
#include "pipeline/distributed/thread_group.hpp"

#include "nvrtc_runtime/errors.hpp"

namespace lab {

ThreadGroup::ThreadGroup(int size) : slots_(size_t(size > 0 ? size : 0)) {
  if (size < 1) throw UsageError("a thread group needs at least one rank, not " + std::to_string(size));
}

void ThreadGroup::throw_if_poisoned_locked() const {
  if (!failure_.empty()) throw RuntimeError(failure_);
}

void ThreadGroup::throw_if_poisoned() {
  std::lock_guard<std::mutex> lock(mutex_);
  throw_if_poisoned_locked();
}

void ThreadGroup::arrive_and_wait() {
  std::unique_lock<std::mutex> lock(mutex_);
  throw_if_poisoned_locked();
  const unsigned long long mine = generation_;
  if (++arrived_ == size()) {
    arrived_ = 0;
    ++generation_;
    changed_.notify_all();
    return;
  }
  changed_.wait(lock, [&] { return generation_ != mine || !failure_.empty(); });
  if (generation_ == mine) throw_if_poisoned_locked();
}

void ThreadGroup::poison(int rank, const std::string& why) noexcept {
  try {
    std::lock_guard<std::mutex> lock(mutex_);
    if (failure_.empty()) failure_ = "rank " + std::to_string(rank) + " failed: " + (why.empty() ? "?" : why);
  } catch (...) {
    // Out of memory while composing the message: nothing better to report.
  }
  changed_.notify_all();
}

}  // namespace lab
