// The --check-bounds address-space reservation: next-fit allocation of [gap | data] records.
#include "nvrtc_runtime/cpu/guard_arena.hpp"

#include <sys/mman.h>

#include <cerrno>
#include <cstring>
#include <iterator>
#include <string>

#include "nvrtc_runtime/errors.hpp"

namespace lab::cpu {

namespace {

constexpr size_t kMinArena = size_t(1) << 30;
constexpr int kReserveFlags = MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE;

}  // namespace

GuardArena::GuardArena() {
  for (size_t size = kSlots * kMaxGap; size >= kMinArena; size /= 2) {
    void* p = ::mmap(nullptr, size, PROT_NONE, kReserveFlags, -1, 0);
    if (p == MAP_FAILED) continue;
    base_ = static_cast<char*>(p);
    size_ = size;
    gap_ = size / kSlots;
    break;
  }
  if (!base_)
    throw RuntimeError("--check-bounds: cannot reserve 1 GiB of address space for guarded buffers (" +
                       std::string(std::strerror(errno)) + "; is `ulimit -v` set?)");
  // The last gap stays reserved so the highest record's data is followed by a gap too.
  free_[base_] = size_ - gap_;
  cursor_ = base_;
}

GuardArena::~GuardArena() {
  ::munmap(base_, size_);
}

char* GuardArena::allocate(size_t bytes) {
  const size_t need = gap_ + bytes;
  auto fits = [need](const auto& range) { return range.second >= need; };
  auto it = free_.lower_bound(cursor_);
  while (it != free_.end() && !fits(*it)) ++it;
  if (it == free_.end()) {
    it = free_.begin();
    while (it != free_.end() && !fits(*it)) ++it;
  }
  if (it == free_.end())
    throw RuntimeError("--check-bounds: no room for a guarded buffer of " + std::to_string(bytes) +
                       " bytes (the guard arena holds about " + std::to_string(kSlots) + " buffers with " +
                       std::to_string(gap_ >> 20) + " MiB between them)");
  char* record = it->first;
  const size_t left = it->second - need;
  free_.erase(it);
  if (left) free_[record + need] = left;
  char* data = record + gap_;
  if (::mprotect(data, bytes, PROT_READ | PROT_WRITE) != 0) {
    release(data, bytes);
    throw RuntimeError("cpu backend: cannot map a guarded buffer of " + std::to_string(bytes) +
                       " bytes: " + std::strerror(errno));
  }
  cursor_ = data + bytes;
  return data;
}

void GuardArena::release(char* data, size_t bytes) noexcept {
  // Mapping PROT_NONE over the range returns its memory to the system.
  ::mmap(data, bytes, PROT_NONE, kReserveFlags | MAP_FIXED, -1, 0);
  char* start = data - gap_;
  size_t length = gap_ + bytes;
  auto next = free_.lower_bound(start);
  if (next != free_.end() && start + length == next->first) {
    length += next->second;
    next = free_.erase(next);
  }
  if (next != free_.begin()) {
    auto prev = std::prev(next);
    if (prev->first + prev->second == start) {
      prev->second += length;
      return;
    }
  }
  free_[start] = length;
}

}  // namespace lab::cpu
