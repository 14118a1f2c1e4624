// Device memory of the cpu backend: host allocations. Plain mode: 64-byte aligned heap blocks. Guarded mode
// (--check-bounds): every buffer gets its own mapping, placed so that its end touches a PROT_NONE guard page
// (with a guard page before it too), so an access past either end faults. Buffers start 16-byte aligned (the
// GPU's float4 alignment), so up to 15 bytes of padding may sit between the end and the guard; those bytes
// hold a canary that is checked after every launch.
#pragma once
#include <cstddef>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>

namespace lab::cpu {

class HostMemory {
 public:
  explicit HostMemory(bool guarded) : guarded_(guarded) {}
  HostMemory(const HostMemory&) = delete;
  HostMemory& operator=(const HostMemory&) = delete;
  ~HostMemory();

  bool guarded() const { return guarded_; }
  void* allocate(size_t bytes);
  void release(void* ptr) noexcept;

  // Guarded mode: throws RuntimeError when [ptr, ptr + bytes) is not inside one buffer (`what` names the
  // operation, e.g. "upload"). No check in plain mode.
  void check_range(const void* ptr, size_t bytes, const char* what) const;
  // Guarded mode: where `address` lies relative to the buffers, e.g. "4 bytes past the end of a 4096-byte
  // buffer (0x7f...)".
  std::string describe_address(const void* address) const;
  // Guarded mode: empty, or a description of the first buffer whose padding canary was overwritten.
  std::string check_padding() const;

 private:
  struct Guarded {
    char* mapping;
    size_t mapping_bytes;
    size_t bytes;   // as requested
    size_t padded;  // bytes rounded up to 16
  };
  bool guarded_;
  mutable std::mutex mutex_;
  std::map<const char*, Guarded> buffers_;  // by start address
};

}  // namespace lab::cpu
