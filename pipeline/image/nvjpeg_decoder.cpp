// NvjpegDecoder: the header through nvjpegGetImageInfo; the hardware backend's batched decode (a batch of
// one per call, on the caller's state) when nvjpegDecodeBatchedSupported accepts the parsed stream, else
// nvjpegDecode on the default backend; then one download of the RGB pixels after a wait on the state's
// stream.
#include "pipeline/image/nvjpeg_decoder.hpp"

#include <cstring>

#include "pipeline/image/jpeg_codec.hpp"
#include "pipeline/image/nvjpeg_buffers.hpp"

namespace lab {

struct NvjpegDecoder::State {
  const NvjpegLibrary* nvjpeg = nullptr;
  cudaStream_t stream = nullptr;
  nvjpegJpegState_t hardware = nullptr;  // initialised for batches of one, RGB interleaved
  nvjpegJpegStream_t parsed = nullptr;   // the hardware backend's parse of the current file
  nvjpegJpegState_t general = nullptr;
  NvjpegBuffers buffers;

  ~State() {
    if (general) nvjpeg->jpeg_state_destroy(general);
    if (parsed) nvjpeg->jpeg_stream_destroy(parsed);
    if (hardware) nvjpeg->jpeg_state_destroy(hardware);
    if (stream) cudaStreamDestroy(stream);
  }
};

NvjpegDecoder::NvjpegDecoder(int device, const std::string& origin)
    : nvjpeg_(load_nvjpeg(origin)), device_(device) {
  check_cuda(cudaSetDevice(device_), "cudaSetDevice", origin);
  // A GPU without JPEG engines refuses the hardware backend (NVJPEG_STATUS_ARCH_MISMATCH or
  // NVJPEG_STATUS_JPEG_NOT_SUPPORTED): then the default backend decodes everything.
  if (nvjpeg_.create_ex(NVJPEG_BACKEND_HARDWARE, nullptr, nullptr, 0, &hardware_) != NVJPEG_STATUS_SUCCESS)
    hardware_ = nullptr;
  check_nvjpeg(nvjpeg_.create_ex(NVJPEG_BACKEND_DEFAULT, nullptr, nullptr, 0, &general_), "nvjpegCreateEx",
               origin);
}

NvjpegDecoder::~NvjpegDecoder() {
  pool_.clear();  // the states before the handles they were made from
  if (general_) nvjpeg_.destroy(general_);
  if (hardware_) nvjpeg_.destroy(hardware_);
}

std::unique_ptr<NvjpegDecoder::State> NvjpegDecoder::make_state(const std::string& name) {
  auto s = std::make_unique<State>();
  s->nvjpeg = &nvjpeg_;
  check_cuda(cudaStreamCreateWithFlags(&s->stream, cudaStreamNonBlocking), "cudaStreamCreateWithFlags", name);
  if (hardware_) {
    check_nvjpeg(nvjpeg_.jpeg_state_create(hardware_, &s->hardware), "nvjpegJpegStateCreate", name);
    check_nvjpeg(nvjpeg_.decode_batched_initialize(hardware_, s->hardware, 1, 1, NVJPEG_OUTPUT_RGBI),
                 "nvjpegDecodeBatchedInitialize", name);
    check_nvjpeg(nvjpeg_.jpeg_stream_create(hardware_, &s->parsed), "nvjpegJpegStreamCreate", name);
  }
  check_nvjpeg(nvjpeg_.jpeg_state_create(general_, &s->general), "nvjpegJpegStateCreate", name);
  return s;
}

bool NvjpegDecoder::decode_on_device(State& s, const std::vector<uint8_t>& bytes,
                                     nvjpegImage_t* destination) {
  const unsigned char* data = bytes.data();
  const size_t length = bytes.size();
  int unsupported = 1;  // nvjpegDecodeBatchedSupported: 0 when the hardware decodes the stream
  if (hardware_ &&
      nvjpeg_.jpeg_stream_parse(hardware_, data, length, 0, 0, s.parsed) == NVJPEG_STATUS_SUCCESS &&
      nvjpeg_.decode_batched_supported(hardware_, s.parsed, &unsupported) == NVJPEG_STATUS_SUCCESS &&
      unsupported == 0 &&
      nvjpeg_.decode_batched(hardware_, s.hardware, &data, &length, destination, s.stream) ==
          NVJPEG_STATUS_SUCCESS)
    return true;
  return nvjpeg_.decode(general_, s.general, data, length, NVJPEG_OUTPUT_RGBI, destination, s.stream) ==
         NVJPEG_STATUS_SUCCESS;
}

std::optional<Image> NvjpegDecoder::decode(const std::vector<uint8_t>& bytes, const std::string& name) {
  if (!looks_like_jpeg(bytes)) return std::nullopt;
  int components = 0, widths[NVJPEG_MAX_COMPONENT] = {}, heights[NVJPEG_MAX_COMPONENT] = {};
  nvjpegChromaSubsampling_t subsampling{};
  if (nvjpeg_.get_image_info(general_, bytes.data(), bytes.size(), &components, &subsampling, widths,
                             heights) != NVJPEG_STATUS_SUCCESS ||
      components != 3 || !image_size_problem(widths[0], heights[0]).empty())
    return std::nullopt;
  check_cuda(cudaSetDevice(device_), "cudaSetDevice", name);
  std::unique_ptr<State> s = pool_.take([&] { return make_state(name); });
  Image image(widths[0], heights[0]);
  s->buffers.reserve(image.rgb.size(), name);
  nvjpegImage_t destination{};
  destination.channel[0] = s->buffers.device();
  destination.pitch[0] = size_t(image.width) * 3;
  if (!decode_on_device(*s, bytes, &destination)) {
    pool_.give_back(std::move(s));
    return std::nullopt;
  }
  check_cuda(cudaMemcpyAsync(s->buffers.staging(), s->buffers.device(), image.rgb.size(),
                             cudaMemcpyDeviceToHost, s->stream),
             "cudaMemcpyAsync", name);
  check_cuda(cudaStreamSynchronize(s->stream), "cudaStreamSynchronize", name);
  std::memcpy(image.rgb.data(), s->buffers.staging(), image.rgb.size());
  pool_.give_back(std::move(s));
  return image;
}

}  // namespace lab
