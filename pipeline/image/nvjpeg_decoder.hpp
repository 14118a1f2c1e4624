// JPEG decode on the GPU with nvJPEG (`lab detect --decode nvjpeg`): the hardware backend (the JPEG engines
// of an A100 / H100 / H200) where it supports the file, else nvJPEG's default backend, into interleaved RGB
// on the device, downloaded through page-locked staging for the host (which draws on the pixels and stages
// the device letterbox from them). The pixels differ slightly from libjpeg-turbo's (nvJPEG's own IDCT and
// chroma upsampling). Files nvJPEG cannot decode are left to the host decoder. A pool of states, each with
// its own stream and buffers, serves concurrent callers; a call waits only for its own stream.
#pragma once
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "pipeline/image/image.hpp"
#include "pipeline/image/nvjpeg_library.hpp"
#include "pipeline/image/nvjpeg_state_pool.hpp"

namespace lab {

class NvjpegDecoder {
 public:
  // On CUDA device `device`. UsageError "<origin>: nvJPEG is not available ..." when the library cannot be
  // loaded; RuntimeError naming the failing call otherwise.
  NvjpegDecoder(int device, const std::string& origin);
  ~NvjpegDecoder();
  NvjpegDecoder(const NvjpegDecoder&) = delete;
  NvjpegDecoder& operator=(const NvjpegDecoder&) = delete;

  // Thread-safe. The RGB image, or nullopt when nvJPEG does not decode these bytes (not a 3-component JPEG,
  // a size image_size_problem refuses, a stream nvJPEG rejects): the caller's host decoder then decodes it or
  // words the error. RuntimeError naming `name` and the CUDA call when the device fails.
  std::optional<Image> decode(const std::vector<uint8_t>& bytes, const std::string& name);
  // Whether the hardware backend was created (false: every file goes to the default backend).
  bool has_hardware() const { return hardware_ != nullptr; }

 private:
  struct State;  // the decode states of both backends, a stream and buffers
  std::unique_ptr<State> make_state(const std::string& name);
  // Decodes into `destination` on the state's stream: by the hardware backend when it takes the file, else
  // the default one; false when neither does.
  bool decode_on_device(State& s, const std::vector<uint8_t>& bytes, nvjpegImage_t* destination);

  const NvjpegLibrary& nvjpeg_;
  const int device_;
  nvjpegHandle_t hardware_ = nullptr;  // NVJPEG_BACKEND_HARDWARE; null where the GPU has no JPEG engine
  nvjpegHandle_t general_ = nullptr;   // NVJPEG_BACKEND_DEFAULT
  NvjpegStatePool<State> pool_;
};

}  // namespace lab
