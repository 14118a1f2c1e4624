// The specs of the weightless nn kernels, and MaxPool2dOp, UpsampleNearest2xOp, CopyPlanesOp: argument checks
// and one launch each.
#include "kernels/nn/plane_ops.hpp"

#include <string>

#include "kernels/nn/nn_params.cuh"
#include "nvrtc_runtime/errors.hpp"

namespace lab {

KernelSpec plane_kernel_spec(const char* name, const char* description, const char* kernel, const char* variant,
                             const char* h_help, std::vector<ParamSpec> extra) {
  using K = ParamSpec::Kind;
  std::vector<ParamSpec> params = {{"B", K::Int, "1", "batch size", 1, 65535},
                                   {"C", K::Int, "64", "channels", 1, 65535},
                                   {"H", K::Int, "20", h_help, 1, 8192},
                                   {"W", K::Int, "20", "input width", 1, 8192}};
  params.insert(params.end(), extra.begin(), extra.end());
  return {.name = name,
          .family = "nn",
          .description = description,
          .source = std::string("nn/") + kernel + ".cu",
          .variants = {{"v1_direct", variant}},
          .params = params,
          .entries = {kernel}};
}

void check_plane_views(const char* op, int batch, int channels, int64_t plane, ConstPlaneView in,
                       PlaneView out) {
  if (batch < 1 || channels < 1 || plane < 1)
    throw UsageError(std::string(op) + ": bad size batch " + std::to_string(batch) + ", " +
                     std::to_string(channels) + " channels, plane " + std::to_string(plane));
  if (!in.data || !out.data) throw UsageError(std::string(op) + ": null input or output view");
  if (plane > 0x3fffffff)
    throw UsageError(std::string(op) + ": plane of " + std::to_string(plane) + " elements is too large");
}

void check_pool_size(const char* op, int channels, int kernel) {
  if (channels < 1 || kernel < 1 || kernel % 2 == 0)
    throw UsageError(std::string(op) + ": needs channels >= 1 and an odd kernel size (got " +
                     std::to_string(channels) + " channels, kernel " + std::to_string(kernel) + ")");
}

const KernelSpec& maxpool2d_spec() {
  static const KernelSpec spec = [] {
    KernelSpec s = plane_kernel_spec(
        "maxpool2d", "max_pool2d K (odd), stride 1, padding K/2 with -inf (SPPF) on [B,C,H,W] channel views",
        kMaxPool2dKernel, "one thread per output element, K x K window through the cache", "height",
        {{"K", ParamSpec::Kind::Int, "5", "window size (odd)", 1, 31}});
    s.validate = [](const Params& p) {
      if (param_int(p, "K") % 2 == 0)
        throw UsageError("parameter K=" + p.at("K") + " of maxpool2d is invalid: must be odd (padding K/2)");
    };
    return s;
  }();
  return spec;
}

const KernelSpec& upsample_nearest2x_spec() {
  static const KernelSpec spec =
      plane_kernel_spec("upsample_nearest2x",
                 "nearest x2 upsampling [B,C,H,W] -> [B,C,2H,2W] into a channel view (the neck's Upsample)",
                 kUpsampleKernel, "one thread per output element, coalesced stores", "input height");
  return spec;
}

const KernelSpec& copy_planes_spec() {
  static const KernelSpec spec = plane_kernel_spec(
      "copy_planes",
      "channel-slice copy between [B,C,H,W] views (a Concat input that cannot be written in place)",
      kCopyPlanesKernel, "one thread per element", "height");
  return spec;
}

MaxPool2dOp::MaxPool2dOp(NnKernels& kernels, int channels, int kernel)
    : kernels_(kernels),
      kernel_(kernels.kernel(kMaxPool2dKernel)),
      channels_(channels),
      kernel_size_(kernel) {
  check_pool_size("maxpool2d", channels, kernel);
}

void MaxPool2dOp::run(int batch, int h, int w, ConstPlaneView in, PlaneView out) const {
  if (h < 1 || w < 1) throw UsageError("maxpool2d: bad plane " + std::to_string(h) + "x" + std::to_string(w));
  check_plane_views("maxpool2d", batch, channels_, int64_t(h) * w, in, out);
  kernels_.backend().launch(
      kernel_, plane_launch("maxpool2d", int64_t(h) * w, channels_, batch),
      kernel_params(MaxPool2dParams{kernel_view(in), kernel_view(out), h, w, kernel_size_}));
}

UpsampleNearest2xOp::UpsampleNearest2xOp(NnKernels& kernels)
    : kernels_(kernels), kernel_(kernels.kernel(kUpsampleKernel)) {}

void UpsampleNearest2xOp::run(int batch, int channels, int h_in, int w_in, ConstPlaneView in,
                              PlaneView out) const {
  if (h_in < 1 || w_in < 1)
    throw UsageError("upsample_nearest2x: bad plane " + std::to_string(h_in) + "x" + std::to_string(w_in));
  check_plane_views("upsample_nearest2x", batch, channels, int64_t(4) * h_in * w_in, in, out);
  kernels_.backend().launch(
      kernel_, plane_launch("upsample_nearest2x", int64_t(4) * h_in * w_in, channels, batch),
      kernel_params(UpsampleNearest2xParams{kernel_view(in), kernel_view(out), h_in, w_in}));
}

CopyPlanesOp::CopyPlanesOp(NnKernels& kernels)
    : kernels_(kernels), kernel_(kernels.kernel(kCopyPlanesKernel)) {}

void CopyPlanesOp::run(int batch, int channels, int64_t plane, ConstPlaneView in, PlaneView out) const {
  check_plane_views("copy_planes", batch, channels, plane, in, out);
  kernels_.backend().launch(kernel_, plane_launch("copy_planes", plane, channels, batch),
                            kernel_params(CopyPlanesParams{kernel_view(in), kernel_view(out), int(plane)}));
}

}  // namespace lab
