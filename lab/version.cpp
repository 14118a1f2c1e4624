// Version text from the generated header (cmake/lab_version_script.cmake) and the runtime.
#include "lab/version.hpp"

#include "lab_version_info.hpp"
#include "nvrtc_runtime/cuda_compiler.hpp"
#include "nvrtc_runtime/runtime_context.hpp"

namespace lab {

std::string lab_version() {
  return LAB_VERSION;
}

std::string version_text(const std::string& arch_option) {
  const std::string arch = arch_option.empty() ? default_cuda_arch() : arch_option;
  const std::string why = !arch_option.empty()     ? "--arch"
                          : cuda_device_present() ? "the live GPU"
                                                  : "no CUDA device; --arch to change";
  return "lab " + lab_version() + " (commit " + LAB_GIT_COMMIT + ")\nNVRTC " + nvrtc_version() +
         "\ntarget arch " + arch + " (" + why + ")";
}

}  // namespace lab
