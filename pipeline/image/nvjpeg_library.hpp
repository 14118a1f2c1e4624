// nvJPEG loaded at run time, as NCCL is (pipeline/distributed/nccl_library.hpp): `lab` never links libnvjpeg,
// so it starts and everything without --encode nvjpeg works where nvJPEG is absent. The library is
// LAB_NVJPEG_LIBRARY when set, else the path the build recorded (the nvidia-nvjpeg wheel that
// scripts/install-deps.sh installs) when it exists, else "libnvjpeg.so.13" by the dynamic loader's search.
#pragma once
#include <cuda_runtime_api.h>
#include <nvjpeg.h>

#include <string>

namespace lab {

// The nvJPEG functions the GPU encoder uses, typed from nvjpeg.h's declarations (decltype never references the
// symbols, so nothing is linked).
struct NvjpegLibrary {
  std::string path;  // what was opened
  decltype(&nvjpegCreateEx) create_ex = nullptr;
  decltype(&nvjpegDestroy) destroy = nullptr;
  decltype(&nvjpegEncoderStateCreate) encoder_state_create = nullptr;
  decltype(&nvjpegEncoderStateDestroy) encoder_state_destroy = nullptr;
  decltype(&nvjpegEncoderParamsCreate) encoder_params_create = nullptr;
  decltype(&nvjpegEncoderParamsDestroy) encoder_params_destroy = nullptr;
  decltype(&nvjpegEncoderParamsSetQuality) encoder_params_set_quality = nullptr;
  decltype(&nvjpegEncoderParamsSetSamplingFactors) encoder_params_set_sampling_factors = nullptr;
  decltype(&nvjpegEncodeImage) encode_image = nullptr;
  decltype(&nvjpegEncodeRetrieveBitstream) encode_retrieve_bitstream = nullptr;
};

// Opens the library once per path and keeps it for the process. Throws UsageError "<origin>: nvJPEG is not
// available (<dlerror>); set LAB_NVJPEG_LIBRARY=/path/libnvjpeg.so.13 or install it
// (scripts/install-deps.sh: the nvidia-nvjpeg wheel)", also when a function is missing from it.
const NvjpegLibrary& load_nvjpeg(const std::string& origin);

// "<call> failed (<status name>)" for a status other than NVJPEG_STATUS_SUCCESS, as RuntimeError prefixed
// with `what` (e.g. the file being encoded).
void check_nvjpeg(nvjpegStatus_t status, const char* call, const std::string& what);
// The same for the CUDA runtime calls around nvJPEG's (streams, buffers, copies): "<what>: <call> failed
// (<cudaGetErrorString>)".
void check_cuda(cudaError_t error, const char* call, const std::string& what);

}  // namespace lab
