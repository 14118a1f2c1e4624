// Everything a backend needs from its surroundings, and the factory that makes backends by name.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "nvrtc_runtime/backend.hpp"
#include "nvrtc_runtime/disk_cache.hpp"
#include "nvrtc_runtime/kernel_tree.hpp"

namespace lab {

inline constexpr double kDefaultCpuTimeoutSeconds = 10;

struct RuntimeOptions {
  std::string arch;           // "sm_90"; empty = the live device's, or sm_90 without a GPU
  bool verbose = false;       // cache notes and compile commands to stderr
  bool check_bounds = false;  // cpu backend: guard pages around every buffer
  // cpu backend: a launch fails when a kernel thread runs this many seconds of CPU time without exiting or
  // reaching a barrier or warp collective (an infinite loop, a spin-wait that cannot end); 0: no limit.
  double timeout_seconds = kDefaultCpuTimeoutSeconds;
  int device = 0;             // cuda backend: the GPU's ordinal (its methods run with that device current)
  // Launches marked LaunchConfig::programmatic_dependent use Programmatic Dependent Launch where the backend
  // can (Backend::programmatic_launch); false: plain launches, for A/B measurement (lab --no-pdl).
  bool programmatic_launch = true;
};

struct RuntimeContext {
  std::shared_ptr<KernelTree> tree;
  std::shared_ptr<DiskCache> cache;
  RuntimeOptions options;
};

int cuda_device_count();  // 0 without a driver or device
bool cuda_device_present();
// "cuda" when a CUDA device is present, else "cpu".
std::string default_backend_name();
// Backends usable on this machine, in preference order.
std::vector<std::string> available_backends();
// Throws UsageError for an unknown name or "cuda" without a device ("no CUDA device is available").
std::unique_ptr<Backend> make_backend(const std::string& name, const RuntimeContext& context);

}  // namespace lab
