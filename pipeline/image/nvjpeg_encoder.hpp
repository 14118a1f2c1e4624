// JPEG encode on the GPU with nvJPEG (`lab detect --encode nvjpeg`): the annotated image, drawn on the host,
// is copied through page-locked staging to the device and encoded there, at the quality and 4:2:0 chroma
// subsampling that encode_jpeg (libjpeg-turbo) writes. A small pool of encoder states, each with its own
// stream, staging and device buffer, serves concurrent callers; a call waits only for its own stream.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "pipeline/image/image.hpp"
#include "pipeline/image/nvjpeg_library.hpp"
#include "pipeline/image/nvjpeg_state_pool.hpp"

namespace lab {

class NvjpegEncoder {
 public:
  // On CUDA device `device`. UsageError "<origin>: nvJPEG is not available ..." when the library cannot be
  // loaded; RuntimeError naming the failing call otherwise.
  NvjpegEncoder(int device, int quality, const std::string& origin);
  ~NvjpegEncoder();
  NvjpegEncoder(const NvjpegEncoder&) = delete;
  NvjpegEncoder& operator=(const NvjpegEncoder&) = delete;

  // Thread-safe. The JPEG file's bytes; RuntimeError naming `name` and the failing call.
  std::vector<uint8_t> encode(const Image& image, const std::string& name);

 private:
  struct State;  // one encoder state with its stream and buffers
  std::unique_ptr<State> make_state(const std::string& name);

  const NvjpegLibrary& nvjpeg_;
  const int device_, quality_;
  nvjpegHandle_t handle_ = nullptr;
  NvjpegStatePool<State> pool_;
};

}  // namespace lab
