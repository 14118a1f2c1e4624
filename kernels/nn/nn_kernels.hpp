// NnKernels: the nn kernels (conv2d, maxpool2d, upsample_nearest2x, copy_planes) compiled once per backend
// for all the ops that share it (the forward has ~100 layers: compiling per layer would load ~100 modules):
// one module of nn_kernels.cu for runners, or, for a network, small modules of the instances it uses,
// compiled side by side; the fp16 / bf16 tensor-core convs (conv2d_mma.cu) likewise, each module compiled on
// first use, so a float32 network never pays for them. Ops hold a reference to it and take their Kernel
// handles at construction.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "nvrtc_runtime/backend.hpp"

namespace lab {

inline constexpr const char* kNnModuleSource = "nn/nn_kernels.cu";
inline constexpr const char* kConv2dMmaSource = "nn/conv2d_mma.cu";

inline constexpr const char* kConv2dDirectKernel = "conv2d_direct";
inline constexpr const char* kConv2dSplitkReduceKernel = "conv2d_splitk_reduce";
inline constexpr const char* kMaxPool2dKernel = "maxpool2d";
inline constexpr const char* kUpsampleKernel = "upsample_nearest2x";
inline constexpr const char* kCopyPlanesKernel = "copy_planes";

// Kernel sizes and channel tiles the conv templates are instantiated for (conv2d_tiled, conv2d_tf32 and
// conv2d_mma share the channel tiles; conv2d_op.hpp names the instances).
inline constexpr int kSpecialisedKernelSizes[] = {1, 3, 5};
inline constexpr int kTiledChannelTiles[] = {16, 32, 64};
bool is_specialised_kernel_size(int k);

// The name expressions the two sources are compiled with: every instance (runners, scenarios, `lab source`),
// or only those a network uses (its convs' variants at their kernel sizes and channel tiles), so a network's
// cold start compiles nothing it never launches.
struct NnKernelNames {
  std::vector<std::string> nn;   // nn_kernels.cu
  std::vector<std::string> mma;  // conv2d_mma.cu (empty: that source is never compiled)
};
NnKernelNames all_nn_kernel_names();

// The modules of `names`: nn_kernels.cu's name expressions, then conv2d_mma.cu's, each source in modules of
// at most `kernels_per_module` kernels. One module per source loads once; smaller modules compile side by
// side (Backend::precompile), which is what a network's cold start wants: each conv instance is most of a
// compile.
std::vector<CompileRequest> nn_module_requests(const NnKernelNames& names = all_nn_kernel_names(),
                                               size_t kernels_per_module = SIZE_MAX);

class NnKernels {
 public:
  explicit NnKernels(Backend& backend, const NnKernelNames& names = all_nn_kernel_names(),
                     size_t kernels_per_module = SIZE_MAX);
  Backend& backend() const { return backend_; }
  // Throws UsageError when the name expression is not part of any module; compiles a module the first time
  // one of its kernels is asked for (so a float32 network never compiles conv2d_mma.cu).
  Kernel kernel(const std::string& name_expression);

 private:
  Backend& backend_;
  std::vector<CompileRequest> requests_;
  std::vector<std::shared_ptr<Module>> modules_;  // requests_[i]'s, once compiled
};

// Grid over (ceil(elements / 256), channels, batch), block 256: the one-thread-per-element nn kernels.
// Throws UsageError naming `op` when channels or batch exceed the grid's 65535 limit.
LaunchConfig plane_launch(const char* op, int64_t elements, int channels, int batch);

}  // namespace lab
