// NvjpegBuffers: cudaMallocHost / cudaMalloc on the calling thread's current device.
#include "pipeline/image/nvjpeg_buffers.hpp"

#include <cuda_runtime_api.h>

#include "pipeline/image/nvjpeg_library.hpp"

namespace lab {

NvjpegBuffers::~NvjpegBuffers() {
  release();
}

void NvjpegBuffers::release() {
  if (device_) cudaFree(device_);
  if (staging_) cudaFreeHost(staging_);
  device_ = staging_ = nullptr;
  capacity_ = 0;
}

void NvjpegBuffers::reserve(size_t bytes, const std::string& name) {
  if (bytes <= capacity_) return;
  release();
  check_cuda(cudaMallocHost(reinterpret_cast<void**>(&staging_), bytes), "cudaMallocHost", name);
  check_cuda(cudaMalloc(reinterpret_cast<void**>(&device_), bytes), "cudaMalloc", name);
  capacity_ = bytes;
}

}  // namespace lab
