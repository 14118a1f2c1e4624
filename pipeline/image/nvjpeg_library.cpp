// load_nvjpeg: the nvJPEG functions bound through runtime_library.hpp, once per library path; the status
// checks.
#include "pipeline/image/nvjpeg_library.hpp"

#include <cstdlib>
#include <filesystem>

#include "nvrtc_runtime/errors.hpp"
#include "pipeline/runtime_library.hpp"

namespace lab {
namespace {

UsageError unavailable(const std::string& origin, const std::string& why) {
  return UsageError(origin + ": nvJPEG is not available (" + why +
                    "); set LAB_NVJPEG_LIBRARY=/path/libnvjpeg.so.13 or install it (scripts/install-deps.sh: "
                    "the nvidia-nvjpeg wheel)");
}

// LAB_NVJPEG_LIBRARY, else the build's recorded library when it is there, else the loader's search.
std::string chosen_path() {
  if (const char* chosen = std::getenv("LAB_NVJPEG_LIBRARY"); chosen && *chosen) return chosen;
  std::error_code ec;
  if (std::filesystem::exists(LAB_NVJPEG_DEFAULT_LIBRARY, ec)) return LAB_NVJPEG_DEFAULT_LIBRARY;
  return "libnvjpeg.so.13";
}

const char* status_name(nvjpegStatus_t status) {
  switch (status) {
    case NVJPEG_STATUS_NOT_INITIALIZED:
      return "NVJPEG_STATUS_NOT_INITIALIZED";
    case NVJPEG_STATUS_INVALID_PARAMETER:
      return "NVJPEG_STATUS_INVALID_PARAMETER";
    case NVJPEG_STATUS_BAD_JPEG:
      return "NVJPEG_STATUS_BAD_JPEG";
    case NVJPEG_STATUS_JPEG_NOT_SUPPORTED:
      return "NVJPEG_STATUS_JPEG_NOT_SUPPORTED";
    case NVJPEG_STATUS_ALLOCATOR_FAILURE:
      return "NVJPEG_STATUS_ALLOCATOR_FAILURE";
    case NVJPEG_STATUS_EXECUTION_FAILED:
      return "NVJPEG_STATUS_EXECUTION_FAILED";
    case NVJPEG_STATUS_ARCH_MISMATCH:
      return "NVJPEG_STATUS_ARCH_MISMATCH";
    case NVJPEG_STATUS_INTERNAL_ERROR:
      return "NVJPEG_STATUS_INTERNAL_ERROR";
    case NVJPEG_STATUS_IMPLEMENTATION_NOT_SUPPORTED:
      return "NVJPEG_STATUS_IMPLEMENTATION_NOT_SUPPORTED";
    case NVJPEG_STATUS_INCOMPLETE_BITSTREAM:
      return "NVJPEG_STATUS_INCOMPLETE_BITSTREAM";
    default:
      return "an unknown nvJPEG status";
  }
}

}  // namespace

const NvjpegLibrary& load_nvjpeg(const std::string& origin) {
  const LibraryUnavailable why = [&](const std::string& reason) { return unavailable(origin, reason); };
  return load_runtime_library<NvjpegLibrary>(
      chosen_path(), why, [](RuntimeLibraryBinder& library, NvjpegLibrary& nvjpeg) {
        library.bind("nvjpegCreateEx", nvjpeg.create_ex);
        library.bind("nvjpegDestroy", nvjpeg.destroy);
        library.bind("nvjpegEncoderStateCreate", nvjpeg.encoder_state_create);
        library.bind("nvjpegEncoderStateDestroy", nvjpeg.encoder_state_destroy);
        library.bind("nvjpegEncoderParamsCreate", nvjpeg.encoder_params_create);
        library.bind("nvjpegEncoderParamsDestroy", nvjpeg.encoder_params_destroy);
        library.bind("nvjpegEncoderParamsSetQuality", nvjpeg.encoder_params_set_quality);
        library.bind("nvjpegEncoderParamsSetSamplingFactors", nvjpeg.encoder_params_set_sampling_factors);
        library.bind("nvjpegEncodeImage", nvjpeg.encode_image);
        library.bind("nvjpegEncodeRetrieveBitstream", nvjpeg.encode_retrieve_bitstream);
      });
}

void check_nvjpeg(nvjpegStatus_t status, const char* call, const std::string& what) {
  if (status != NVJPEG_STATUS_SUCCESS)
    throw RuntimeError(what + ": " + call + " failed (" + status_name(status) + ")");
}

void check_cuda(cudaError_t error, const char* call, const std::string& what) {
  if (error != cudaSuccess)
    throw RuntimeError(what + ": " + call + " failed (" + cudaGetErrorString(error) + ")");
}

}  // namespace lab
