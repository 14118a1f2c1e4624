// Backend selection by name and device detection.
#include "nvrtc_runtime/runtime_context.hpp"

#include <cuda_runtime.h>

#include "nvrtc_runtime/cpu/cpu_backend.hpp"
#include "nvrtc_runtime/cuda_backend.hpp"

namespace lab {

int cuda_device_count() {
  static const int devices = [] {
    int count = 0;
    const cudaError_t e = cudaGetDeviceCount(&count);
    cudaGetLastError();
    return e == cudaSuccess ? count : 0;
  }();
  return devices;
}

bool cuda_device_present() {
  return cuda_device_count() > 0;
}

std::string default_backend_name() {
  return cuda_device_present() ? "cuda" : "cpu";
}

std::vector<std::string> available_backends() {
  if (cuda_device_present()) return {"cuda", "cpu"};
  return {"cpu"};
}

std::unique_ptr<Backend> make_backend(const std::string& name, const RuntimeContext& context) {
  if (name == "cuda") return make_cuda_backend(context);
  if (name == "cpu") return make_cpu_backend(context);
  throw UsageError("unknown backend '" + name + "' (valid: cuda, cpu)");
}

}  // namespace lab
