// load_nvjpeg: dlopen + dlsym of the nvJPEG functions, cached per library path; the status checks.
#include "pipeline/image/nvjpeg_library.hpp"

#include <dlfcn.h>

#include <cstdlib>
#include <filesystem>
#include <map>
#include <mutex>

#include "nvrtc_runtime/errors.hpp"

namespace lab {
namespace {

UsageError unavailable(const std::string& origin, const std::string& why) {
  return UsageError(origin + ": nvJPEG is not available (" + why +
                    "); set LAB_NVJPEG_LIBRARY=/path/libnvjpeg.so.13 or install it (scripts/install-deps.sh: "
                    "the nvidia-nvjpeg wheel)");
}

template <class Function>
void find(void* handle, const char* name, Function& function, const std::string& path,
          const std::string& origin) {
  function = reinterpret_cast<Function>(dlsym(handle, name));
  if (!function) throw unavailable(origin, path + " has no " + name);
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
    case NVJPEG_STATUS_NOT_INITIALIZED: return "NVJPEG_STATUS_NOT_INITIALIZED";
    case NVJPEG_STATUS_INVALID_PARAMETER: return "NVJPEG_STATUS_INVALID_PARAMETER";
    case NVJPEG_STATUS_BAD_JPEG: return "NVJPEG_STATUS_BAD_JPEG";
    case NVJPEG_STATUS_JPEG_NOT_SUPPORTED: return "NVJPEG_STATUS_JPEG_NOT_SUPPORTED";
    case NVJPEG_STATUS_ALLOCATOR_FAILURE: return "NVJPEG_STATUS_ALLOCATOR_FAILURE";
    case NVJPEG_STATUS_EXECUTION_FAILED: return "NVJPEG_STATUS_EXECUTION_FAILED";
    case NVJPEG_STATUS_ARCH_MISMATCH: return "NVJPEG_STATUS_ARCH_MISMATCH";
    case NVJPEG_STATUS_INTERNAL_ERROR: return "NVJPEG_STATUS_INTERNAL_ERROR";
    case NVJPEG_STATUS_IMPLEMENTATION_NOT_SUPPORTED: return "NVJPEG_STATUS_IMPLEMENTATION_NOT_SUPPORTED";
    case NVJPEG_STATUS_INCOMPLETE_BITSTREAM: return "NVJPEG_STATUS_INCOMPLETE_BITSTREAM";
    default: return "an unknown nvJPEG status";
  }
}

}  // namespace

const NvjpegLibrary& load_nvjpeg(const std::string& origin) {
  static std::mutex mutex;
  static std::map<std::string, NvjpegLibrary> loaded;
  const std::string path = chosen_path();
  std::lock_guard<std::mutex> lock(mutex);
  if (auto it = loaded.find(path); it != loaded.end()) return it->second;

  void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!handle) {
    const char* why = dlerror();
    throw unavailable(origin, why ? why : path + ": cannot be opened");
  }
  NvjpegLibrary nvjpeg;
  nvjpeg.path = path;
  try {
    find(handle, "nvjpegCreateEx", nvjpeg.create_ex, path, origin);
    find(handle, "nvjpegDestroy", nvjpeg.destroy, path, origin);
    find(handle, "nvjpegEncoderStateCreate", nvjpeg.encoder_state_create, path, origin);
    find(handle, "nvjpegEncoderStateDestroy", nvjpeg.encoder_state_destroy, path, origin);
    find(handle, "nvjpegEncoderParamsCreate", nvjpeg.encoder_params_create, path, origin);
    find(handle, "nvjpegEncoderParamsDestroy", nvjpeg.encoder_params_destroy, path, origin);
    find(handle, "nvjpegEncoderParamsSetQuality", nvjpeg.encoder_params_set_quality, path, origin);
    find(handle, "nvjpegEncoderParamsSetSamplingFactors", nvjpeg.encoder_params_set_sampling_factors, path,
         origin);
    find(handle, "nvjpegEncodeImage", nvjpeg.encode_image, path, origin);
    find(handle, "nvjpegEncodeRetrieveBitstream", nvjpeg.encode_retrieve_bitstream, path, origin);
    find(handle, "nvjpegGetImageInfo", nvjpeg.get_image_info, path, origin);
    find(handle, "nvjpegJpegStateCreate", nvjpeg.jpeg_state_create, path, origin);
    find(handle, "nvjpegJpegStateDestroy", nvjpeg.jpeg_state_destroy, path, origin);
    find(handle, "nvjpegDecode", nvjpeg.decode, path, origin);
    find(handle, "nvjpegDecodeBatchedInitialize", nvjpeg.decode_batched_initialize, path, origin);
    find(handle, "nvjpegDecodeBatched", nvjpeg.decode_batched, path, origin);
    find(handle, "nvjpegJpegStreamCreate", nvjpeg.jpeg_stream_create, path, origin);
    find(handle, "nvjpegJpegStreamDestroy", nvjpeg.jpeg_stream_destroy, path, origin);
    find(handle, "nvjpegJpegStreamParse", nvjpeg.jpeg_stream_parse, path, origin);
    find(handle, "nvjpegDecodeBatchedSupported", nvjpeg.decode_batched_supported, path, origin);
  } catch (...) {
    dlclose(handle);
    throw;
  }
  // The handle stays open for the process: encoders and their CUDA work may outlive any caller.
  return loaded.emplace(path, std::move(nvjpeg)).first->second;
}

void check_nvjpeg(nvjpegStatus_t status, const char* call, const std::string& what) {
  if (status != NVJPEG_STATUS_SUCCESS)
    throw RuntimeError(what + ": " + call + " failed (" + status_name(status) + ")");
}

void check_cuda(cudaError_t error, const char* call, const std::string& what) {
  if (error != cudaSuccess) throw RuntimeError(what + ": " + call + " failed (" + cudaGetErrorString(error) + ")");
}

}  // namespace lab
