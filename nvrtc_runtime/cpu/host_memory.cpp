// Host allocations for the cpu backend; in checked mode guarded by a GuardArena, with canaries and fault
// attribution to the nearest buffer.
#include "nvrtc_runtime/cpu/host_memory.hpp"

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "nvrtc_runtime/errors.hpp"

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

// The number of bytes of [begin, end) from the first one that is not the canary to the end; 0 if all are.
size_t overwritten_from_start(const char* begin, const char* end) {
  for (const char* p = begin; p < end; ++p)
    if (uint8_t(*p) != kCanary) return size_t(end - p);
  return 0;
}

// The number of bytes of [begin, end) from the start up to the last one that is not the canary; 0 if all are.
size_t overwritten_to_end(const char* begin, const char* end) {
  for (const char* p = end; p > begin; --p)
    if (uint8_t(p[-1]) != kCanary) return size_t(p - begin);
  return 0;
}

}  // namespace

HostMemory::HostMemory(bool guarded) {
  if (guarded) arena_ = std::make_unique<GuardArena>();
}

HostMemory::~HostMemory() {
  if (arena_)
    for (auto& [start, g] : buffers_) arena_->release(g.data, g.data_bytes);
}

void* HostMemory::allocate(size_t bytes) {
  if (!arena_) {
    void* p = std::aligned_alloc(64, round_up(bytes ? bytes : 1, 64));
    if (!p)
      throw RuntimeError("cpu backend: out of host memory allocating " + std::to_string(bytes) + " bytes");
    return p;
  }
  const size_t padded = round_up(bytes ? bytes : 1, 16);
  const size_t data_bytes = round_up(padded, page_bytes());
  std::lock_guard lock(mutex_);
  char* data = arena_->allocate(data_bytes);
  char* start = data + data_bytes - padded;
  std::memset(data, kCanary, size_t(start - data));
  std::memset(start + bytes, kCanary, padded - bytes);
  buffers_[start] = Guarded{data, data_bytes, bytes};
  return start;
}

void HostMemory::release(void* ptr) noexcept {
  if (!ptr) return;
  if (!arena_) {
    std::free(ptr);
    return;
  }
  std::lock_guard lock(mutex_);
  auto it = buffers_.find(static_cast<const char*>(ptr));
  if (it == buffers_.end()) return;
  arena_->release(it->second.data, it->second.data_bytes);
  buffers_.erase(it);
}

void HostMemory::check_range(const void* ptr, size_t bytes, const char* what) const {
  if (!arena_) return;
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

HostMemory::Buffers::const_iterator HostMemory::nearest(const char* a) const {
  auto above = buffers_.upper_bound(a);  // first buffer starting after a
  if (above == buffers_.begin()) return above;
  auto below = std::prev(above);  // last buffer starting at or before a
  if (above == buffers_.end()) return below;
  const uintptr_t past_below = uintptr_t(a) - uintptr_t(below->first + below->second.bytes);
  const uintptr_t before_above = uintptr_t(above->first) - uintptr_t(a);
  return a < below->first + below->second.bytes || past_below < before_above ? below : above;
}

std::string HostMemory::name_of(Buffers::const_iterator buffer,
                                const std::vector<NamedPointer>& pointers) const {
  std::string text = "a " + std::to_string(buffer->second.bytes) + "-byte buffer at " +
                     address_text(buffer->first);
  for (const NamedPointer& p : pointers) {
    const char* v = static_cast<const char*>(p.value);
    if (v >= buffer->first && v <= buffer->first + buffer->second.bytes) return text + " (" + p.name + ")";
  }
  return text;
}

std::string HostMemory::describe_address(const void* address, const std::vector<NamedPointer>& pointers) const {
  const char* a = static_cast<const char*>(address);
  if (uintptr_t(a) < page_bytes()) return "a null pointer (address " + address_text(address) + ")";
  if (!arena_)
    return "address " + address_text(address) + " (run with --check-bounds to find the buffer it missed)";
  std::lock_guard lock(mutex_);
  auto it = nearest(a);
  if (it == buffers_.end())
    return "address " + address_text(address) + ", while this backend has no buffer allocated";
  const char* start = it->first;
  const std::string buffer = name_of(it, pointers);
  if (a < start) return std::to_string(start - a) + " bytes before the start of " + buffer;
  const size_t offset = size_t(a - start);
  if (offset < it->second.bytes) return "byte " + std::to_string(offset) + " of " + buffer;
  return "byte " + std::to_string(offset) + " of " + buffer + ", " + std::to_string(offset - it->second.bytes) +
         " bytes past its end";
}

std::string HostMemory::check_padding() {
  if (!arena_) return {};
  std::lock_guard lock(mutex_);
  for (const auto& [start, g] : buffers_) {
    const char* end = start + g.bytes;
    const char* pages_end = g.data + g.data_bytes;
    std::string overrun;
    const std::string buffer = "a " + std::to_string(g.bytes) + "-byte buffer (" + address_text(start);
    if (size_t n = overwritten_to_end(end, pages_end))
      overrun = "wrote up to " + std::to_string(n) + " bytes past the end of " + buffer +
                ", into its alignment padding)";
    else if (size_t n = overwritten_from_start(g.data, start))
      overrun = "wrote up to " + std::to_string(n) + " bytes before the start of " + buffer +
                ", into the unused start of its first page)";
    if (overrun.empty()) continue;
    // Re-arm the canary, so the next launch is not blamed for this one's write.
    std::memset(g.data, kCanary, size_t(start - g.data));
    std::memset(g.data + (end - g.data), kCanary, size_t(pages_end - end));
    return overrun;
  }
  return {};
}

}  // namespace lab::cpu
