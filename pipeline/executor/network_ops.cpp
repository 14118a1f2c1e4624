// NetworkOps: walks the model description once, giving each conv the precision of its role
// (precision_policy.hpp), and uploads every Conv's folded weights.
#include "pipeline/executor/network_ops.hpp"

#include <algorithm>

#include "kernels/detect/anchor_grid.hpp"
#include "kernels/detect/topk_postprocess.hpp"
#include "nvrtc_runtime/errors.hpp"
#include "pipeline/executor/model_walk.hpp"
#include "pipeline/executor/precision_policy.hpp"

namespace lab {

Conv2dShape conv_shape(const ConvSpec& spec) {
  return {spec.c_in, spec.c_out, spec.kernel, spec.stride, spec.groups, spec.silu};
}

NnKernelNames NetworkOps::kernel_names(const Yolo26Model& model, Precision precision) {
  NnKernelNames names{{kConv2dSplitkReduceKernel, kMaxPool2dKernel, kUpsampleKernel, kCopyPlanesKernel}, {}};
  for_each_conv(model, precision, [&names](const ConvSpec& c, Precision p) {
    const Conv2dShape shape = conv_shape(c);
    const ConvVariant v = choose_conv_variant(shape, p);
    auto& list = conv_variant_half_type(v) ? names.mma : names.nn;
    const std::string name = conv_kernel_name(v, shape);
    if (std::find(list.begin(), list.end(), name) == list.end()) list.push_back(name);
  });
  return names;
}

std::vector<CompileRequest> NetworkOps::compile_requests(const Yolo26Model& model, Precision precision) {
  std::vector<CompileRequest> requests =
      nn_module_requests(kernel_names(model, precision), kNetworkKernelsPerModule);
  requests.push_back(detect_decode_spec().compile_request("v1_fused", {}));
  requests.push_back(topk_postprocess_spec().compile_request("v1_radix_bitonic", {}));
  return requests;
}

NetworkOps::NetworkOps(Backend& backend, const Yolo26Model& model, Precision precision)
    : backend_(backend),
      kernels_(std::make_unique<NnKernels>(backend, kernel_names(model, precision), kNetworkKernelsPerModule)),
      upsample_(std::make_unique<UpsampleNearest2xOp>(*kernels_)),
      copy_(std::make_unique<CopyPlanesOp>(*kernels_)) {
  for_each_conv(model, precision, [this](const ConvSpec& c, Precision p) {
    convs_[c.name] = std::make_unique<Conv2dOp>(*kernels_, conv_shape(c), c.weight, c.bias, p);
  });
}

const MaxPool2dOp& NetworkOps::pool(int channels, int kernel) {
  auto& op = pools_[{channels, kernel}];
  if (!op) op = std::make_unique<MaxPool2dOp>(*kernels_, channels, kernel);
  return *op;
}

const DetectDecodeOp& NetworkOps::decode(int height, int width) {
  auto& op = decodes_[{height, width}];
  if (!op) op = std::make_unique<DetectDecodeOp>(backend_, make_anchor_grid(height, width));
  return *op;
}

const Conv2dOp& NetworkOps::conv(const ConvSpec& spec) const {
  auto it = convs_.find(spec.name);
  if (it == convs_.end()) throw RuntimeError("no conv op for '" + spec.name + "'");
  return *it->second;
}

}  // namespace lab
