// DeviceBuffer ownership: frees through the backend that allocated it.
#include "nvrtc_runtime/backend.hpp"

namespace lab {

DeviceBuffer& DeviceBuffer::operator=(DeviceBuffer&& o) noexcept {
  if (this != &o) {
    if (ptr_ && backend_) backend_->release(ptr_);
    backend_ = o.backend_, ptr_ = o.ptr_, bytes_ = o.bytes_;
    o.backend_ = nullptr, o.ptr_ = nullptr, o.bytes_ = 0;
  }
  return *this;
}

DeviceBuffer::~DeviceBuffer() {
  if (ptr_ && backend_) backend_->release(ptr_);
}

}  // namespace lab
