// Fiber stacks: mmap'ed regions of [guard page | stack] slots.
#include "nvrtc_runtime/cpu/fiber_stacks.hpp"

#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>

#include "nvrtc_runtime/errors.hpp"

namespace lab::cpu {

namespace {
size_t page_bytes() {
  static const size_t page = size_t(::sysconf(_SC_PAGESIZE));
  return page;
}
}  // namespace

FiberStacks::~FiberStacks() {
  for (const Region& r : regions_) ::munmap(r.base, r.bytes);
}

void FiberStacks::reserve(size_t count) {
  if (count <= stacks_.size()) return;
  const size_t add = count - stacks_.size();
  const size_t slot = page_bytes() + kStackBytes;
  const size_t bytes = add * slot;
  void* mem =
      ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (mem == MAP_FAILED)
    throw RuntimeError("cpu backend: cannot map " + std::to_string(add) +
                       " fiber stacks: " + std::strerror(errno));
  char* base = static_cast<char*>(mem);
  regions_.push_back({base, bytes, add});
  for (size_t i = 0; i < add; ++i) {
    char* slot_base = base + i * slot;
    if (::mprotect(slot_base, page_bytes(), PROT_NONE) != 0)
      throw RuntimeError(std::string("cpu backend: cannot protect a fiber stack guard page: ") +
                         std::strerror(errno));
    stacks_.push_back(slot_base + slot);
  }
}

bool FiberStacks::in_guard_page(const void* address) const {
  const char* a = static_cast<const char*>(address);
  const size_t slot = page_bytes() + kStackBytes;
  for (const Region& r : regions_) {
    if (a < r.base || a >= r.base + r.bytes) continue;
    return size_t(a - r.base) % slot < page_bytes();
  }
  return false;
}

}  // namespace lab::cpu
