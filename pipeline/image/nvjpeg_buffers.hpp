// The pixel buffers of one GPU codec state: page-locked staging on the host and the device image, of one
// size, grown when a larger image comes (the pixels cross PCIe between them by DMA on the state's stream).
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>

namespace lab {

class NvjpegBuffers {
 public:
  NvjpegBuffers() = default;
  ~NvjpegBuffers();
  NvjpegBuffers(const NvjpegBuffers&) = delete;
  NvjpegBuffers& operator=(const NvjpegBuffers&) = delete;

  // Both hold at least `bytes` afterwards (their contents are not kept). RuntimeError naming `name` and the
  // CUDA call when an allocation fails.
  void reserve(size_t bytes, const std::string& name);
  uint8_t* staging() const { return staging_; }  // page-locked host memory
  uint8_t* device() const { return device_; }

 private:
  void release();
  uint8_t* staging_ = nullptr;
  uint8_t* device_ = nullptr;
  size_t capacity_ = 0;
};

}  // namespace lab
