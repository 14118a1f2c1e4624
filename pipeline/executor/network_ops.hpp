// The kernel ops of one network on one backend, made once at load: every Conv's
// weights uploaded to the device (at the network's precision), the nn kernels compiled once; the detect
// decode (its module and anchor grid) once per image size, shared by the plans of every batch at that size.
// The other shape-dependent ops (PSA attention, top-k) belong to a plan.
#pragma once
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "nvrtc_runtime/backend.hpp"
#include "kernels/detect/detect_decode.hpp"
#include "kernels/nn/conv2d_op.hpp"
#include "kernels/nn/nn_kernels.hpp"
#include "kernels/nn/plane_ops.hpp"
#include "pipeline/model/yolo26_model.hpp"

namespace lab {

// One kernel per nn module: a conv instance is most of a compile (NVRTC for sm_90 on the 2-core machine:
// 0.6-1.9 s each, the fp32 network's 11 kernels in one module 19 s; docs/detect.md "Cold start"), so a cold
// start compiles them all side by side.
inline constexpr size_t kNetworkKernelsPerModule = 1;

// The kernel-side shape of a model conv.
Conv2dShape conv_shape(const ConvSpec& spec);

class NetworkOps {
 public:
  NetworkOps(Backend& backend, const Yolo26Model& model, Precision precision);
  // The nn kernels the network's convs use at `precision` (each conv at its role's precision).
  static NnKernelNames kernel_names(const Yolo26Model& model, Precision precision);
  // The modules the constructor and decode() compile (for Backend::precompile).
  static std::vector<CompileRequest> compile_requests(const Yolo26Model& model, Precision precision);
  Backend& backend() const { return backend_; }
  NnKernels& kernels() { return *kernels_; }
  const Conv2dOp& conv(const ConvSpec& spec) const;   // by the spec's state-dict name
  const MaxPool2dOp& pool(int channels, int kernel);  // made on first use per (channels, kernel size)
  const UpsampleNearest2xOp& upsample() const { return *upsample_; }
  const CopyPlanesOp& copy() const { return *copy_; }
  // Made (compiled, anchor grid uploaded) on the first use of an input size in pixels.
  const DetectDecodeOp& decode(int height, int width);

 private:
  Backend& backend_;
  std::unique_ptr<NnKernels> kernels_;
  std::map<std::string, std::unique_ptr<Conv2dOp>> convs_;
  std::map<std::pair<int, int>, std::unique_ptr<MaxPool2dOp>> pools_;
  std::unique_ptr<UpsampleNearest2xOp> upsample_;
  std::unique_ptr<CopyPlanesOp> copy_;
  std::map<std::pair<int, int>, std::unique_ptr<DetectDecodeOp>> decodes_;
};

}  // namespace lab
