// The cpu backend's model of CUDA streams for copies to the host. Kernels still run at once, in issue order,
// but a download_async() lands in host memory only when the host waits for it as it must on cuda: for the
// lane it was issued on (wait_lane), or for the main lane once that lane joined it (synchronize,
// wait_lane(0), a synchronous copy). Until then its destination holds poison (0xFF bytes: NaN in floats and
// doubles), so a read that skips the wait fails on the emulator instead of passing by luck. The bytes are
// taken at issue (every launch before it has run). Lanes are forked, used, joined and waited for with cuda's
// checks.
#pragma once
#include <cstddef>
#include <mutex>
#include <set>

#include "nvrtc_runtime/host_buffer.hpp"

namespace lab::cpu {

class HostCopyLanes {
 public:
  HostCopyLanes() = default;
  HostCopyLanes(const HostCopyLanes&) = delete;
  HostCopyLanes& operator=(const HostCopyLanes&) = delete;
  ~HostCopyLanes();  // copies never waited for are dropped

  void fork(int lane);
  void use(int lane);
  void join(int lane);
  void join_all();
  // Delivers the copies the host has now waited for: those issued on `lane`, and for lane 0 also those of
  // every joined lane.
  void wait(int lane);

  void download_async(void* host_dst, const void* device_src, size_t bytes);
  size_t pending() const;  // copies issued and not yet delivered or dropped

  // Host memory whose release drops the pending copies into it (on cuda, freeing page-locked memory waits
  // for the device), so a copy never lands in freed memory.
  static HostBuffer alloc_host(size_t bytes);

 private:
  void deliver(int lane, bool joined_too);
  std::mutex mutex_;
  std::set<int> open_;
  int current_ = 0, forked_max_ = 0;
};

}  // namespace lab::cpu
