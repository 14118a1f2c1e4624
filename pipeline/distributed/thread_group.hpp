// The meeting point of ranks that are threads of one process: a reusable barrier that a failed rank poisons,
// and one slot per rank where the ranks publish the buffers of the collective they are in. ThreadCommunicator
// builds its operations from these; NcclCommunicator's local ranks share one for its poison alone.
#pragma once
#include <condition_variable>
#include <cstddef>
#include <mutex>
#include <string>
#include <vector>

namespace lab {

class ThreadGroup {
 public:
  // What a rank publishes for the current collective (pointers stay valid until the collective's last wait).
  struct Slot {
    void* data = nullptr;
    size_t count = 0;
  };

  explicit ThreadGroup(int size);
  int size() const { return int(slots_.size()); }

  Slot& slot(int rank) { return slots_[size_t(rank)]; }

  // Returns when every rank has called it (once per phase); throws RuntimeError "rank K failed: <why>" when a
  // rank has poisoned the group, before or during the wait.
  void arrive_and_wait();

  // The first poison wins; every wait, now and later, throws its message.
  void poison(int rank, const std::string& why) noexcept;
  // Throws the poison's RuntimeError, if any (for ranks that wait elsewhere, e.g. on a CUDA stream).
  void throw_if_poisoned();

 private:
  void throw_if_poisoned_locked() const;

  std::vector<Slot> slots_;
  std::mutex mutex_;
  std::condition_variable changed_;
  int arrived_ = 0;
  unsigned long long generation_ = 0;
  std::string failure_;  // non-empty once poisoned
};

}  // namespace lab
