// The nn ops that move planes without weights: MaxPool2dOp (SPPF), UpsampleNearest2xOp (the neck's
// Upsample) and CopyPlanesOp (a Concat input whose producer cannot write in place), and the kernel specs
// their runners are made from. Views as plane_view.hpp.
#pragma once
#include "kernels/kernel_spec.hpp"
#include "kernels/nn/nn_kernels.hpp"
#include "kernels/nn/plane_view.hpp"

namespace lab {

// The spec of a one-variant plane kernel: parameters B, C, H (described by `h_help`), W, then `extra`; source
// nn/<kernel>.cu, entry `kernel`, variant v1_direct described by `variant`.
KernelSpec plane_kernel_spec(const char* name, const char* description, const char* kernel, const char* variant,
                             const char* h_help, std::vector<ParamSpec> extra = {});
// Throws UsageError naming `op` on a bad size (batch, channels or plane < 1, a plane too large for the int
// indices of the kernels) or a null view.
void check_plane_views(const char* op, int batch, int channels, int64_t plane, ConstPlaneView in, PlaneView out);
// Throws UsageError naming `op` unless channels >= 1 and the pool's kernel size is odd (padding kernel/2).
void check_pool_size(const char* op, int channels, int kernel);

const KernelSpec& maxpool2d_spec();           // B, C, H, W, K (odd)
const KernelSpec& upsample_nearest2x_spec();  // B, C, H, W (the input plane)
const KernelSpec& copy_planes_spec();         // B, C, H, W

// max_pool2d(kernel, stride 1, padding kernel/2, -inf padding) over `channels` planes; kernel odd.
class MaxPool2dOp {
 public:
  MaxPool2dOp(NnKernels& kernels, int channels, int kernel = 5);
  // in and out [batch, channels, h, w].
  void run(int batch, int h, int w, ConstPlaneView in, PlaneView out) const;
  int kernel_size() const { return kernel_size_; }

 private:
  NnKernels& kernels_;
  Kernel kernel_;
  int channels_, kernel_size_;
};

class UpsampleNearest2xOp {
 public:
  explicit UpsampleNearest2xOp(NnKernels& kernels);
  // in [batch, channels, h_in, w_in] -> out [batch, channels, 2 h_in, 2 w_in].
  void run(int batch, int channels, int h_in, int w_in, ConstPlaneView in, PlaneView out) const;

 private:
  NnKernels& kernels_;
  Kernel kernel_;
};

class CopyPlanesOp {
 public:
  explicit CopyPlanesOp(NnKernels& kernels);
  // out[b, c, p] = in[b, c, p] for c < channels, p < plane.
  void run(int batch, int channels, int64_t plane, ConstPlaneView in, PlaneView out) const;

 private:
  NnKernels& kernels_;
  Kernel kernel_;
};

}  // namespace lab
