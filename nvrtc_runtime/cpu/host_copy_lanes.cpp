// HostCopyLanes: the pending copies to the host, kept in one registry for the process so that releasing host
// memory (a plain function, HostBuffer's release) can drop the copies into it.
#include "nvrtc_runtime/cpu/host_copy_lanes.hpp"

#include <algorithm>
#include <cstring>
#include <new>
#include <string>
#include <vector>

#include "nvrtc_runtime/errors.hpp"

namespace lab::cpu {
namespace {

struct PendingCopy {
  const HostCopyLanes* owner;
  int lane;
  bool joined;  // its lane joined the main lane: waiting for the main lane delivers it
  char* dst;
  std::vector<char> bytes;
};

struct Registry {
  std::mutex mutex;
  std::vector<PendingCopy> copies;
};

Registry& registry() {
  static Registry r;
  return r;
}

// alloc_host's memory: a 64-byte header holding the size, then the caller's bytes (64-byte aligned).
constexpr size_t kHeader = 64;
constexpr std::align_val_t kAlignment{64};

void release_host(void* ptr) noexcept {
  char* base = static_cast<char*>(ptr) - kHeader;
  size_t bytes = 0;
  std::memcpy(&bytes, base, sizeof(bytes));
  const char* begin = static_cast<const char*>(ptr);
  {
    std::lock_guard lock(registry().mutex);
    std::erase_if(registry().copies, [&](const PendingCopy& c) {
      return c.dst < begin + bytes && begin < c.dst + c.bytes.size();
    });
  }
  ::operator delete(base, kAlignment);
}

}  // namespace

HostCopyLanes::~HostCopyLanes() {
  std::lock_guard lock(registry().mutex);
  std::erase_if(registry().copies, [this](const PendingCopy& c) { return c.owner == this; });
}

void HostCopyLanes::fork(int lane) {
  if (lane < 1) throw RuntimeError("lane " + std::to_string(lane) + " cannot be forked");
  std::lock_guard lock(mutex_);
  open_.insert(lane);
  forked_max_ = std::max(forked_max_, lane);
}

void HostCopyLanes::use(int lane) {
  std::lock_guard lock(mutex_);
  if (lane != 0 && !open_.count(lane)) throw RuntimeError("lane " + std::to_string(lane) + " was not forked");
  current_ = lane;
}

void HostCopyLanes::join(int lane) {
  std::lock_guard lock(mutex_);
  if (!open_.erase(lane)) return;
  if (current_ == lane) current_ = 0;
  std::lock_guard copies(registry().mutex);
  for (PendingCopy& c : registry().copies)
    if (c.owner == this && c.lane == lane) c.joined = true;
}

void HostCopyLanes::join_all() {
  std::vector<int> lanes;
  {
    std::lock_guard lock(mutex_);
    lanes.assign(open_.begin(), open_.end());
  }
  for (int lane : lanes) join(lane);
  std::lock_guard lock(mutex_);
  current_ = 0;
}

void HostCopyLanes::wait(int lane) {
  {
    std::lock_guard lock(mutex_);
    if (lane < 0 || lane > forked_max_)
      throw RuntimeError("lane " + std::to_string(lane) + " was never forked");
  }
  deliver(lane, lane == 0);
}

void HostCopyLanes::download_async(void* host_dst, const void* device_src, size_t bytes) {
  std::lock_guard lock(mutex_);
  const char* src = static_cast<const char*>(device_src);
  PendingCopy copy{this, current_, false, static_cast<char*>(host_dst), std::vector<char>(src, src + bytes)};
  std::memset(host_dst, 0xFF, bytes);
  std::lock_guard copies(registry().mutex);
  registry().copies.push_back(std::move(copy));
}

size_t HostCopyLanes::pending() const {
  std::lock_guard lock(registry().mutex);
  return size_t(std::count_if(registry().copies.begin(), registry().copies.end(),
                              [this](const PendingCopy& c) { return c.owner == this; }));
}

void HostCopyLanes::deliver(int lane, bool joined_too) {
  std::lock_guard lock(registry().mutex);
  std::erase_if(registry().copies, [&](const PendingCopy& c) {
    if (c.owner != this || !(c.lane == lane || (joined_too && c.joined))) return false;
    std::memcpy(c.dst, c.bytes.data(), c.bytes.size());
    return true;
  });
}

HostBuffer HostCopyLanes::alloc_host(size_t bytes) {
  if (bytes == 0) return {};
  char* base = static_cast<char*>(::operator new(kHeader + bytes, kAlignment));
  std::memcpy(base, &bytes, sizeof(bytes));
  return HostBuffer(base + kHeader, bytes, release_host);
}

}  // namespace lab::cpu
