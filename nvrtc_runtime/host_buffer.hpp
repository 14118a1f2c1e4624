// Host memory for staging transfers (Backend::alloc_host): page-locked on cuda, so copies to and from it are
// DMA and an asynchronous upload returns at once; ordinary memory on cpu. It is freed by the function it was
// allocated with rather than through the backend, so it may outlive the backend that made it.
#pragma once
#include <cstddef>

namespace lab {

class HostBuffer {
 public:
  using Release = void (*)(void*) noexcept;

  HostBuffer() = default;
  HostBuffer(void* ptr, size_t bytes, Release release) : ptr_(ptr), bytes_(bytes), release_(release) {}
  HostBuffer(HostBuffer&& o) noexcept { *this = static_cast<HostBuffer&&>(o); }
  HostBuffer& operator=(HostBuffer&& o) noexcept;
  HostBuffer(const HostBuffer&) = delete;
  HostBuffer& operator=(const HostBuffer&) = delete;
  ~HostBuffer();

  void* get() const { return ptr_; }
  template <class T>
  T* as() const {
    return static_cast<T*>(ptr_);
  }
  size_t bytes() const { return bytes_; }

  // Ordinary (pageable) memory, 64-byte aligned: what backends without page-locked memory hand out.
  static HostBuffer pageable(size_t bytes);

 private:
  void* ptr_ = nullptr;
  size_t bytes_ = 0;
  Release release_ = nullptr;
};

}  // namespace lab
