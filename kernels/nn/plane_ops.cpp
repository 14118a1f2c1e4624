// MaxPool2dOp, UpsampleNearest2xOp, CopyPlanesOp: argument checks and one launch each.
#include "kernels/nn/plane_ops.hpp"

#include <string>

#include "nvrtc_runtime/errors.hpp"

namespace lab {

namespace {

void check_views(const char* op, int batch, int channels, int64_t plane, ConstPlaneView in, PlaneView out) {
  if (batch < 1 || channels < 1 || plane < 1)
    throw UsageError(std::string(op) + ": bad size batch " + std::to_string(batch) + ", " +
                     std::to_string(channels) + " channels, plane " + std::to_string(plane));
  if (!in.data || !out.data) throw UsageError(std::string(op) + ": null input or output view");
  if (plane > 0x3fffffff)
    throw UsageError(std::string(op) + ": plane of " + std::to_string(plane) + " elements is too large");
}

}  // namespace

MaxPool2dOp::MaxPool2dOp(NnKernels& kernels, int channels, int kernel)
    : kernels_(kernels),
      kernel_(kernels.kernel(kMaxPool2dKernel)),
      channels_(channels),
      kernel_size_(kernel) {
  if (channels < 1 || kernel < 1 || kernel % 2 == 0)
    throw UsageError("maxpool2d: needs channels >= 1 and an odd kernel size (got " +
                     std::to_string(channels) + " channels, kernel " + std::to_string(kernel) + ")");
}

void MaxPool2dOp::run(int batch, int h, int w, ConstPlaneView in, PlaneView out) const {
  if (h < 1 || w < 1) throw UsageError("maxpool2d: bad plane " + std::to_string(h) + "x" + std::to_string(w));
  check_views("maxpool2d", batch, channels_, int64_t(h) * w, in, out);
  const float* in_p = in.data;
  float* out_p = out.data;
  long long in_bs = in.batch_stride, in_cs = in.channel_stride, out_bs = out.batch_stride,
            out_cs = out.channel_stride;
  int k = kernel_size_;
  kernels_.backend().launch(kernel_, plane_launch("maxpool2d", int64_t(h) * w, channels_, batch),
                            kernel_args(in_p, in_bs, in_cs, out_p, out_bs, out_cs, h, w, k));
}

UpsampleNearest2xOp::UpsampleNearest2xOp(NnKernels& kernels)
    : kernels_(kernels), kernel_(kernels.kernel(kUpsampleKernel)) {}

void UpsampleNearest2xOp::run(int batch, int channels, int h_in, int w_in, ConstPlaneView in,
                              PlaneView out) const {
  if (h_in < 1 || w_in < 1)
    throw UsageError("upsample_nearest2x: bad plane " + std::to_string(h_in) + "x" + std::to_string(w_in));
  check_views("upsample_nearest2x", batch, channels, int64_t(4) * h_in * w_in, in, out);
  const float* in_p = in.data;
  float* out_p = out.data;
  long long in_bs = in.batch_stride, in_cs = in.channel_stride, out_bs = out.batch_stride,
            out_cs = out.channel_stride;
  kernels_.backend().launch(kernel_,
                            plane_launch("upsample_nearest2x", int64_t(4) * h_in * w_in, channels, batch),
                            kernel_args(in_p, in_bs, in_cs, out_p, out_bs, out_cs, h_in, w_in));
}

CopyPlanesOp::CopyPlanesOp(NnKernels& kernels)
    : kernels_(kernels), kernel_(kernels.kernel(kCopyPlanesKernel)) {}

void CopyPlanesOp::run(int batch, int channels, int64_t plane, ConstPlaneView in, PlaneView out) const {
  check_views("copy_planes", batch, channels, plane, in, out);
  const float* in_p = in.data;
  float* out_p = out.data;
  long long in_bs = in.batch_stride, in_cs = in.channel_stride, out_bs = out.batch_stride,
            out_cs = out.channel_stride;
  int n = int(plane);
  kernels_.backend().launch(kernel_, plane_launch("copy_planes", plane, channels, batch),
                            kernel_args(in_p, in_bs, in_cs, out_p, out_bs, out_cs, n));
}

}  // namespace lab
