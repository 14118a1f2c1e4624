// Device memory of the cpu backend: host allocations. Plain mode: 64-byte aligned heap blocks. Guarded mode
// (--check-bounds): every buffer lives in a GuardArena, so tens of GiB of PROT_NONE address space separate it
// from every other buffer and an access at any realistic offset faults; the fault address is attributed to
// the nearest live buffer. A buffer's end sits at the end of its last page; it starts 16-byte aligned (the
// GPU's float4 alignment), so the few bytes of its pages outside the buffer (before its start, and up to 15
// after its end) are readable: they hold a canary that is checked after every launch.
#pragma once
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "nvrtc_runtime/cpu/guard_arena.hpp"

namespace lab::cpu {

// A value that may point into a buffer, with the words that name it ("argument 0 (float*)").
struct NamedPointer {
  std::string name;
  const void* value;
};

class HostMemory {
 public:
  explicit HostMemory(bool guarded);
  HostMemory(const HostMemory&) = delete;
  HostMemory& operator=(const HostMemory&) = delete;
  ~HostMemory();

  bool guarded() const { return bool(arena_); }
  void* allocate(size_t bytes);
  void release(void* ptr) noexcept;

  // Guarded mode: throws RuntimeError when [ptr, ptr + bytes) is not inside one buffer (`what` names the
  // operation, e.g. "upload"). No check in plain mode.
  void check_range(const void* ptr, size_t bytes, const char* what) const;
  // Where a faulting `address` lies, relative to the nearest live buffer in guarded mode, e.g. "byte 4008 of a
  // 4000-byte buffer at 0x7f..., 8 bytes past its end (argument 0 (float*))": the buffer is named by the
  // first of `pointers` that points into it.
  std::string describe_address(const void* address, const std::vector<NamedPointer>& pointers) const;
  // Guarded mode: empty, or a description of the first buffer whose canary bytes were overwritten (its canary
  // is then restored).
  std::string check_padding();

 private:
  struct Guarded {
    char* data;          // page-aligned start of its read-write range
    size_t data_bytes;   // length of that range (whole pages)
    size_t bytes;        // as requested
  };
  using Buffers = std::map<const char*, Guarded>;  // by buffer start
  Buffers::const_iterator nearest(const char* address) const;
  std::string name_of(Buffers::const_iterator buffer, const std::vector<NamedPointer>& pointers) const;

  std::unique_ptr<GuardArena> arena_;  // guarded mode only
  mutable std::mutex mutex_;
  Buffers buffers_;
};

}  // namespace lab::cpu
