// The address space behind --check-bounds buffers: one large PROT_NONE reservation (no memory, only address
// space) out of which every buffer gets a readable, writable range with at least `gap()` inaccessible bytes
// before and after it. An access from a buffer's pointer at any offset smaller than half the gap lands in
// the reservation's PROT_NONE bytes, faults, and is nearer to that buffer than to any other. Freed ranges go
// back to PROT_NONE (their memory is returned) and are reused last (allocation continues after the previous
// one and wraps), so a stale pointer keeps faulting for as long as possible.
#pragma once
#include <cstddef>
#include <map>

namespace lab::cpu {

class GuardArena {
 public:
  // The largest gap: 16 GiB, so an access up to 8 GiB from a buffer (any signed 32-bit index times an element
  // of up to 4 bytes, any 32-bit index times 2) is attributed to it, and one up to 16 GiB away faults.
  static constexpr size_t kMaxGap = size_t(16) << 30;
  // Live buffers the arena is laid out for (each takes at least one gap): yolo26n's training pass holds about
  // 1,400 at once (at 64 GiB gaps the arena's 1,024 could not hold it).
  static constexpr size_t kSlots = 4096;

  // Reserves kSlots * kMaxGap (64 TiB: half of x86-64's user address space), or half of that as often as
  // needed under an address-space limit
  // (`ulimit -v`); the gap shrinks with it. Throws RuntimeError when not even 1 GiB can be reserved.
  GuardArena();
  ~GuardArena();
  GuardArena(const GuardArena&) = delete;
  GuardArena& operator=(const GuardArena&) = delete;

  size_t gap() const { return gap_; }
  // A page-aligned, zero-filled, read-write range of `bytes` (a multiple of the page size) with at least gap()
  // PROT_NONE bytes on each side. Throws RuntimeError when the arena is full.
  char* allocate(size_t bytes);
  // Returns a range from allocate() (same `bytes`) to PROT_NONE and frees its memory.
  void release(char* data, size_t bytes) noexcept;

 private:
  char* base_ = nullptr;
  size_t size_ = 0;
  size_t gap_ = 0;
  std::map<char*, size_t> free_;  // start -> bytes of each free range (PROT_NONE), coalesced
  char* cursor_ = nullptr;        // allocation continues from here
};

}  // namespace lab::cpu
