// Fiber stacks of one worker thread: fixed-size stacks, each with a PROT_NONE guard page below it (a stack
// overflow faults instead of corrupting the neighbour), mapped on demand and reused by every block.
#pragma once
#include <cstddef>
#include <vector>

namespace lab::cpu {

class FiberStacks {
 public:
  static constexpr size_t kStackBytes = 64 * 1024;

  FiberStacks() = default;
  FiberStacks(const FiberStacks&) = delete;
  FiberStacks& operator=(const FiberStacks&) = delete;
  ~FiberStacks();

  // Makes sure stacks 0..count-1 exist (maps more when needed).
  void reserve(size_t count);
  // Highest address of stack i (stacks grow down).
  void* top(size_t i) const { return stacks_[i]; }
  // True when `address` lies in one of the guard pages (a fiber overflowed its stack).
  bool in_guard_page(const void* address) const;

 private:
  struct Region {
    char* base;
    size_t bytes;
    size_t count;
  };
  std::vector<Region> regions_;
  std::vector<void*> stacks_;
};

}  // namespace lab::cpu
