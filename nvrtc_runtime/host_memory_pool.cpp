// HostMemoryPool: the smallest kept block that fits, else a new one; freed blocks are kept.
#include "nvrtc_runtime/host_memory_pool.hpp"

#include <algorithm>
#include <cstdint>
#include <new>

namespace lab {

size_t HostMemoryPool::blocks() const {
  std::lock_guard lock(mutex_);
  return blocks_.size();
}

void* HostMemoryPool::do_allocate(size_t bytes, size_t alignment) {
  bytes = std::max<size_t>(bytes, 1);
  const auto aligned = [alignment](const HostBuffer& m) {
    return reinterpret_cast<uintptr_t>(m.get()) % alignment == 0;
  };
  std::lock_guard lock(mutex_);
  Block* best = nullptr;
  for (Block& b : blocks_)
    if (!b.in_use && b.memory.bytes() >= bytes && aligned(b.memory) &&
        (!best || b.memory.bytes() < best->memory.bytes()))
      best = &b;
  if (!best) {
    HostBuffer memory = allocate_(bytes);
    if (!memory.get() || !aligned(memory)) throw std::bad_alloc();
    best = &blocks_.emplace_back(Block{std::move(memory), false});
  }
  best->in_use = true;
  return best->memory.get();
}

void HostMemoryPool::do_deallocate(void* p, size_t, size_t) {
  std::lock_guard lock(mutex_);
  for (Block& b : blocks_)
    if (b.memory.get() == p) b.in_use = false;
}

}  // namespace lab
