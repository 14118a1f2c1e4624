// Host allocations for the cpu backend, with guard pages and canaries in checked mode.
#include "host_memory.hpp"

#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "errors.hpp"

namespace lab::cpu {

namespace {

constexpr uint8_t kCanary = 0xA5;

size_t page_bytes() {
  static const size_t page = size_t(::sysconf(_SC_PAGESIZE));
  return page;
}

size_t round_up(size_t v, size_t to) {
  return (v + to - 1) / to * to;
}

std::string address_text(const void* p) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%p", p);
  return buf;
}

}  // namespace

HostMemory::~HostMemory() {
  for (auto& [start, g] : buffers_) ::munmap(g.mapping, g.mapping_bytes);
}

void* HostMemory::allocate(size_t bytes) {
  if (!guarded_) {
    void* p = std::aligned_alloc(64, round_up(bytes ? bytes : 1, 64));
    if (!p)
      throw RuntimeError("cpu backend: out of host memory allocating " + std::to_string(bytes) + " bytes");
    return p;
  }
  const size_t page = page_bytes();
  const size_t padded = round_up(bytes ? bytes : 1, 16);
  const size_t span = round_up(padded, page);
  const size_t total = page + span + page;
  void* mem = ::mmap(nullptr, total, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (mem == MAP_FAILED)
    throw RuntimeError("cpu backend: cannot map a guarded buffer of " + std::to_string(bytes) +
                       " bytes: " + std::strerror(errno));
  char* mapping = static_cast<char*>(mem);
  ::mprotect(mapping, page, PROT_NONE);
  ::mprotect(mapping + page + span, page, PROT_NONE);
  char* start = mapping + page + span - padded;
  std::memset(start + bytes, kCanary, padded - bytes);
  std::lock_guard lock(mutex_);
  buffers_[start] = Guarded{mapping, total, bytes, padded};
  return start;
}

void HostMemory::release(void* ptr) noexcept {
  if (!ptr) return;
  if (!guarded_) {
    std::free(ptr);
    return;
  }
  std::lock_guard lock(mutex_);
  auto it = buffers_.find(static_cast<const char*>(ptr));
  if (it == buffers_.end()) return;
  ::munmap(it->second.mapping, it->second.mapping_bytes);
  buffers_.erase(it);
}

void HostMemory::check_range(const void* ptr, size_t bytes, const char* what) const {
  if (!guarded_) return;
  const char* p = static_cast<const char*>(ptr);
  std::lock_guard lock(mutex_);
  auto it = buffers_.upper_bound(p);
  if (it != buffers_.begin()) {
    --it;
    const char* start = it->first;
    if (p >= start && p <= start + it->second.bytes) {
      if (size_t(p - start) + bytes <= it->second.bytes) return;
      throw RuntimeError(std::string(what) + " of " + std::to_string(bytes) + " bytes at offset " +
                         std::to_string(p - start) + " overruns a " + std::to_string(it->second.bytes) +
                         "-byte buffer");
    }
  }
  throw RuntimeError(std::string(what) + " of " + std::to_string(bytes) + " bytes at " + address_text(ptr) +
                     " is not inside any buffer of this backend");
}

std::string HostMemory::describe_address(const void* address) const {
  const char* a = static_cast<const char*>(address);
  const size_t page = page_bytes();
  std::lock_guard lock(mutex_);
  for (const auto& [start, g] : buffers_) {
    const char* end = start + g.bytes;
    const std::string buffer = "a " + std::to_string(g.bytes) + "-byte buffer at " + address_text(start);
    if (a >= end && a < g.mapping + g.mapping_bytes)
      return "byte " + std::to_string(a - start) + " of " + buffer;
    if (a >= g.mapping && a < start)
      return std::to_string(start - a) + " bytes before the start of " + buffer;
  }
  if (a < reinterpret_cast<const char*>(page))
    return "a null pointer (address " + address_text(address) + ")";
  return "address " + address_text(address) + ", which is not inside or next to any buffer of this backend";
}

std::string HostMemory::check_padding() const {
  if (!guarded_) return {};
  std::lock_guard lock(mutex_);
  for (const auto& [start, g] : buffers_) {
    for (size_t i = g.padded; i > g.bytes; --i) {
      if (uint8_t(start[i - 1]) != kCanary)
        return "wrote up to " + std::to_string(i - g.bytes) + " bytes past the end of a " +
               std::to_string(g.bytes) + "-byte buffer (" + address_text(start) +
               ", into its alignment padding)";
    }
  }
  return {};
}

}  // namespace lab::cpu
