// The backward ops of the weightless nn layers, on the kernels of nn_backward_kernels.cu (one module,
// compiled once per backend by NnBackwardKernels): MaxPool2dBackwardOp (SPPF's pools),
// UpsampleNearest2xBackwardOp (the neck's Upsample), AddPlanesOp (gradient accumulation into channel slices:
// residuals, split / concat), and the kernel specs their runners are made from. Views as plane_view.hpp.
// Every op either starts its gradient (GradientWrite::Overwrite) or adds to it (Accumulate). The BatchNorm
// chain rule from folded to raw parameters is per channel and stays on the host (docs/training.md).
#pragma once
#include <memory>
#include <optional>
#include <string>

#include "kernels/kernel_spec.hpp"
#include "kernels/nn/plane_view.hpp"
#include "nvrtc_runtime/backend.hpp"

namespace lab {

inline constexpr const char* kNnBackwardModuleSource = "nn/nn_backward_kernels.cu";
inline constexpr const char* kMaxPool2dBackwardKernel = "maxpool2d_backward";
inline constexpr const char* kMaxPool2dBackwardPlaneKernel = "maxpool2d_backward_plane";
// v2_plane_smem's largest plane: the plane and its arg-maxes in 32 KB of shared memory (SPPF's planes are
// 20x20 at 640, 40x40 at 1280).
inline constexpr int64_t kPoolPlaneSmemCells = 4096;
inline constexpr const char* kUpsampleBackwardKernel = "upsample_nearest2x_backward";
inline constexpr const char* kAddPlanesKernel = "add_planes";

const KernelSpec& maxpool2d_backward_spec();           // B, C, H, W, K (odd), TIES, ACCUMULATE; variants
const KernelSpec& upsample_nearest2x_backward_spec();  // B, C, H, W (the input plane), ACCUMULATE
const KernelSpec& add_planes_spec();                   // B, C, H, W, ACCUMULATE

// The one compile request of nn_backward_kernels.cu: its three kernels.
CompileRequest nn_backward_module_request();

enum class GradientWrite { Overwrite, Accumulate };

// The module of nn_backward_kernels.cu for one backend, compiled at construction; ops hold a reference.
class NnBackwardKernels {
 public:
  explicit NnBackwardKernels(Backend& backend);
  Backend& backend() const { return backend_; }
  Kernel kernel(const char* name) const { return module_->kernel(name); }

 private:
  Backend& backend_;
  std::shared_ptr<Module> module_;
};

// v1_direct (any plane) and v2_plane_smem (a plane of at most kPoolPlaneSmemCells cells):
// maxpool2d_backward.cu.
enum class PoolBackwardVariant { Direct, PlaneSmem };
// The variant a spec variant name forces; nullopt for "auto".
std::optional<PoolBackwardVariant> parse_pool_backward_variant(const std::string& name);

// The input gradient of max_pool2d(kernel, stride 1, padding kernel/2) over `channels` planes; kernel odd.
class MaxPool2dBackwardOp {
 public:
  // Without `force`, each run takes v2_plane_smem where the plane fits, else v1_direct.
  MaxPool2dBackwardOp(NnBackwardKernels& kernels, int channels, int kernel = 5,
                      std::optional<PoolBackwardVariant> force = std::nullopt);
  // in (the pool's forward input), grad_out and grad_in [batch, channels, h, w]; grad_in must not overlap the
  // others.
  void run(int batch, int h, int w, ConstPlaneView in, ConstPlaneView grad_out, PlaneView grad_in,
           GradientWrite write) const;
  int kernel_size() const { return kernel_size_; }

 private:
  NnBackwardKernels& kernels_;
  Kernel direct_, plane_;
  int channels_, kernel_size_;
  std::optional<PoolBackwardVariant> force_;
};

class UpsampleNearest2xBackwardOp {
 public:
  explicit UpsampleNearest2xBackwardOp(NnBackwardKernels& kernels);
  // grad_out [batch, channels, 2 h_in, 2 w_in] -> grad_in [batch, channels, h_in, w_in].
  void run(int batch, int channels, int h_in, int w_in, ConstPlaneView grad_out, PlaneView grad_in,
           GradientWrite write) const;

 private:
  NnBackwardKernels& kernels_;
  Kernel kernel_;
};

class AddPlanesOp {
 public:
  explicit AddPlanesOp(NnBackwardKernels& kernels);
  // dst[b, c, p] (+)= src[b, c, p] for c < channels, p < plane.
  void run(int batch, int channels, int64_t plane, ConstPlaneView src, PlaneView dst,
           GradientWrite write) const;

 private:
  NnBackwardKernels& kernels_;
  Kernel kernel_;
};

}  // namespace lab
