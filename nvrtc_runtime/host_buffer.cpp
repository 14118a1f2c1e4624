// HostBuffer ownership, and the pageable allocation of backends without page-locked memory.
#include "nvrtc_runtime/host_buffer.hpp"

#include <new>

namespace lab {
namespace {

constexpr std::align_val_t kAlignment{64};

void release_pageable(void* ptr) noexcept {
  ::operator delete(ptr, kAlignment);
}

}  // namespace

HostBuffer& HostBuffer::operator=(HostBuffer&& o) noexcept {
  if (this != &o) {
    if (ptr_ && release_) release_(ptr_);
    ptr_ = o.ptr_, bytes_ = o.bytes_, release_ = o.release_;
    o.ptr_ = nullptr, o.bytes_ = 0, o.release_ = nullptr;
  }
  return *this;
}

HostBuffer::~HostBuffer() {
  if (ptr_ && release_) release_(ptr_);
}

HostBuffer HostBuffer::pageable(size_t bytes) {
  if (bytes == 0) return {};
  return HostBuffer(::operator new(bytes, kAlignment), bytes, release_pageable);
}

}  // namespace lab
