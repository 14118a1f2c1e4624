// NetworkOps: walks the model description once, giving each conv the precision of its role
// (precision_policy.hpp), and uploads every Conv's folded weights.
#include "pipeline/executor/network_ops.hpp"

#include <algorithm>

#include "kernels/detect/anchor_grid.hpp"
#include "kernels/detect/topk_postprocess.hpp"
#include "nvrtc_runtime/errors.hpp"
#include "pipeline/executor/precision_policy.hpp"

namespace lab {
namespace {

template <class F>
void for_each_conv(const BottleneckSpec& b, F&& f) {
  f(b.cv1), f(b.cv2);
}

template <class F>
void for_each_conv(const PsaBlockSpec& p, F&& f) {
  f(p.attn.qkv), f(p.attn.pe), f(p.attn.proj), f(p.ffn0), f(p.ffn1);
}

template <class F>
void for_each_conv(const LayerSpec& layer, F&& f) {
  using K = LayerSpec::Kind;
  switch (layer.kind) {
    case K::Conv:
      f(layer.conv);
      break;
    case K::C3k2:
      f(layer.c3k2.cv1), f(layer.c3k2.cv2);
      for (const C3k2BlockSpec& block : layer.c3k2.m) {
        if (block.kind == C3k2BlockSpec::Kind::C3k) {
          f(block.c3k.cv1), f(block.c3k.cv2), f(block.c3k.cv3);
          for (const BottleneckSpec& b : block.c3k.m) for_each_conv(b, f);
        } else {
          for_each_conv(block.bottleneck, f);
          if (block.kind == C3k2BlockSpec::Kind::BottleneckPsa) for_each_conv(block.psa, f);
        }
      }
      break;
    case K::Sppf:
      f(layer.sppf.cv1), f(layer.sppf.cv2);
      break;
    case K::C2Psa:
      f(layer.c2psa.cv1), f(layer.c2psa.cv2);
      for (const PsaBlockSpec& p : layer.c2psa.m) for_each_conv(p, f);
      break;
    case K::Detect:
      for (const DetectLevelSpec& level : layer.detect.levels) {
        for (const ConvSpec& c : level.box) f(c);
        for (const ConvSpec& c : level.cls) f(c);
      }
      break;
    case K::Upsample:
    case K::Concat:
      break;
  }
}

// Each conv with the precision the policy gives its role.
template <class F>
void for_each_conv(const Yolo26Model& model, Precision network, F&& f) {
  for (const LayerSpec& layer : model.layers) {
    const bool stem = layer.index == 0 && layer.kind == LayerSpec::Kind::Conv;
    const ConvRole role = stem ? ConvRole::Stem : ConvRole::Body;
    for_each_conv(layer, [&](const ConvSpec& c) { f(c, conv_precision(role, network)); });
  }
}

}  // namespace

Conv2dShape conv_shape(const ConvSpec& spec) {
  return {spec.c_in, spec.c_out, spec.kernel, spec.stride, spec.groups, spec.silu};
}

NnKernelNames NetworkOps::kernel_names(const Yolo26Model& model, Precision precision) {
  NnKernelNames names{{kConv2dSplitkReduceKernel, kMaxPool2dKernel, kUpsampleKernel, kCopyPlanesKernel}, {}};
  for_each_conv(model, precision, [&names](const ConvSpec& c, Precision p) {
    const Conv2dShape shape = conv_shape(c);
    const ConvVariant v = choose_conv_variant(shape, p);
    auto& list = v == ConvVariant::Fp16 || v == ConvVariant::Bf16 ? names.mma : names.nn;
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
