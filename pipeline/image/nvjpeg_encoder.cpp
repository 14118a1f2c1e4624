// NvjpegEncoder: per state, the image goes host -> page-locked staging -> device (cudaMemcpyAsync on the
// state's stream), nvjpegEncodeImage encodes it from interleaved RGB, and the bitstream comes back after a
// wait on that stream alone.
#include "pipeline/image/nvjpeg_encoder.hpp"

#include <cstring>

#include "pipeline/image/nvjpeg_buffers.hpp"

namespace lab {

struct NvjpegEncoder::State {
  const NvjpegLibrary* nvjpeg = nullptr;
  cudaStream_t stream = nullptr;
  nvjpegEncoderState_t state = nullptr;
  nvjpegEncoderParams_t params = nullptr;
  NvjpegBuffers buffers;

  ~State() {
    if (params) nvjpeg->encoder_params_destroy(params);
    if (state) nvjpeg->encoder_state_destroy(state);
    if (stream) cudaStreamDestroy(stream);
  }
};

NvjpegEncoder::NvjpegEncoder(int device, int quality, const std::string& origin)
    : nvjpeg_(load_nvjpeg(origin)), device_(device), quality_(quality) {
  check_cuda(cudaSetDevice(device_), "cudaSetDevice", origin);
  check_nvjpeg(nvjpeg_.create_ex(NVJPEG_BACKEND_DEFAULT, nullptr, nullptr, 0, &handle_), "nvjpegCreateEx",
               origin);
}

NvjpegEncoder::~NvjpegEncoder() {
  pool_.clear();  // the states before the handle they were made from
  if (handle_) nvjpeg_.destroy(handle_);
}

std::unique_ptr<NvjpegEncoder::State> NvjpegEncoder::make_state(const std::string& name) {
  auto s = std::make_unique<State>();
  s->nvjpeg = &nvjpeg_;
  check_cuda(cudaStreamCreateWithFlags(&s->stream, cudaStreamNonBlocking), "cudaStreamCreateWithFlags", name);
  check_nvjpeg(nvjpeg_.encoder_state_create(handle_, &s->state, s->stream), "nvjpegEncoderStateCreate", name);
  check_nvjpeg(nvjpeg_.encoder_params_create(handle_, &s->params, s->stream), "nvjpegEncoderParamsCreate",
               name);
  check_nvjpeg(nvjpeg_.encoder_params_set_quality(s->params, quality_, s->stream),
               "nvjpegEncoderParamsSetQuality", name);
  check_nvjpeg(nvjpeg_.encoder_params_set_sampling_factors(s->params, NVJPEG_CSS_420, s->stream),
               "nvjpegEncoderParamsSetSamplingFactors", name);
  return s;
}

std::vector<uint8_t> NvjpegEncoder::encode(const Image& image, const std::string& name) {
  check_cuda(cudaSetDevice(device_), "cudaSetDevice", name);
  std::unique_ptr<State> s = pool_.take([&] { return make_state(name); });
  const size_t bytes = image.rgb.size();
  s->buffers.reserve(bytes, name);
  std::memcpy(s->buffers.staging(), image.rgb.data(), bytes);
  check_cuda(
      cudaMemcpyAsync(s->buffers.device(), s->buffers.staging(), bytes, cudaMemcpyHostToDevice, s->stream),
      "cudaMemcpyAsync", name);
  nvjpegImage_t source{};
  source.channel[0] = s->buffers.device();
  source.pitch[0] = size_t(image.width) * 3;
  check_nvjpeg(nvjpeg_.encode_image(handle_, s->state, s->params, &source, NVJPEG_INPUT_RGBI, image.width,
                                    image.height, s->stream),
               "nvjpegEncodeImage", name);
  size_t length = 0;
  check_nvjpeg(nvjpeg_.encode_retrieve_bitstream(handle_, s->state, nullptr, &length, s->stream),
               "nvjpegEncodeRetrieveBitstream", name);
  check_cuda(cudaStreamSynchronize(s->stream), "cudaStreamSynchronize", name);
  std::vector<uint8_t> encoded(length);
  check_nvjpeg(nvjpeg_.encode_retrieve_bitstream(handle_, s->state, encoded.data(), &length, s->stream),
               "nvjpegEncodeRetrieveBitstream", name);
  check_cuda(cudaStreamSynchronize(s->stream), "cudaStreamSynchronize", name);
  encoded.resize(length);
  pool_.give_back(std::move(s));
  return encoded;
}

}  // namespace lab
