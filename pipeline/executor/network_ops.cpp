// NetworkOps: walks the model description once, giving each conv the precision of its role
// (precision_policy.hpp), and uploads every Conv's folded weights.
#include "pipeline/executor/network_ops.hpp"

#include <algorithm>

#include "detect/anchor_grid.hpp"
#include "detect/topk_postprocess_op.hpp"
#include "errors.hpp"
#include "pipeline/executor/precision_policy.hpp"

namespace lab {
namespace {

// f(spec, role) for every conv of a part of the model.
template <class F>
void for_each_conv(const BottleneckSpec& b, F&& f) {
  f(b.cv1, ConvRole::Body), f(b.cv2, ConvRole::Body);
}

template <class F>
void for_each_conv(const PsaBlockSpec& p, F&& f) {
  f(p.attn.qkv, ConvRole::Attention), f(p.attn.pe, ConvRole::Attention), f(p.attn.proj, ConvRole::Attention);
  f(p.ffn0, ConvRole::Body), f(p.ffn1, ConvRole::Body);
}

template <class F>
void for_each_conv(const std::vector<ConvSpec>& head_branch, F&& f) {
  for (size_t i = 0; i < head_branch.size(); ++i)
    f(head_branch[i], i + 1 == head_branch.size() ? ConvRole::HeadOutput : ConvRole::HeadHidden);
}

template <class F>
void for_each_conv(const LayerSpec& layer, F&& f) {
  using K = LayerSpec::Kind;
  constexpr ConvRole body = ConvRole::Body;
  switch (layer.kind) {
    case K::Conv:
      f(layer.conv, body);
      break;
    case K::C3k2:
      f(layer.c3k2.cv1, body), f(layer.c3k2.cv2, body);
      for (const C3k2BlockSpec& block : layer.c3k2.m) {
        if (block.kind == C3k2BlockSpec::Kind::C3k) {
          f(block.c3k.cv1, body), f(block.c3k.cv2, body), f(block.c3k.cv3, body);
          for (const BottleneckSpec& b : block.c3k.m) for_each_conv(b, f);
        } else {
          for_each_conv(block.bottleneck, f);
          if (block.kind == C3k2BlockSpec::Kind::BottleneckPsa) for_each_conv(block.psa, f);
        }
      }
      break;
    case K::Sppf:
      f(layer.sppf.cv1, body), f(layer.sppf.cv2, body);
      break;
    case K::C2Psa:
      f(layer.c2psa.cv1, body), f(layer.c2psa.cv2, body);
      for (const PsaBlockSpec& p : layer.c2psa.m) for_each_conv(p, f);
      break;
    case K::Detect:
      for (const DetectLevelSpec& level : layer.detect.levels) {
        for_each_conv(level.box, f);
        for_each_conv(level.cls, f);
      }
      break;
    case K::Upsample:
    case K::Concat:
      break;
  }
}

Conv2dShape shape_of(const ConvSpec& spec) {
  return {spec.c_in, spec.c_out, spec.kernel, spec.stride, spec.groups, spec.silu};
}

// Each conv with the precision the policy gives its role.
template <class F>
void for_each_conv(const Yolo26Model& model, Precision network, F&& f) {
  for (const LayerSpec& layer : model.layers)
    for_each_conv(layer, [&](const ConvSpec& c, ConvRole role) { f(c, conv_precision(role, network)); });
}

}  // namespace

NnKernelNames NetworkOps::kernel_names(const Yolo26Model& model, Precision precision) {
  NnKernelNames names{{kConv2dSplitkReduceKernel, kMaxPool2dKernel, kUpsampleKernel, kCopyPlanesKernel}, {}};
  for_each_conv(model, precision, [&names](const ConvSpec& c, Precision p) {
    const Conv2dShape shape = shape_of(c);
    const ConvVariant v = choose_conv_variant(shape, p);
    auto& list = v == ConvVariant::Fp16 || v == ConvVariant::Bf16 ? names.mma : names.nn;
    const std::string name = conv_kernel_name(v, shape);
    if (std::find(list.begin(), list.end(), name) == list.end()) list.push_back(name);
  });
  return names;
}

std::vector<CompileRequest> NetworkOps::compile_requests(const Yolo26Model& model, Precision precision) {
  const NnKernelNames names = kernel_names(model, precision);
  std::vector<CompileRequest> requests{nn_module_request(names), detect_decode_compile_request(),
                                       topk_compile_request()};
  if (!names.mma.empty()) requests.push_back(conv2d_mma_module_request(names));
  return requests;
}

NetworkOps::NetworkOps(Backend& backend, const Yolo26Model& model, Precision precision)
    : backend_(backend),
      kernels_(std::make_unique<NnKernels>(backend, kernel_names(model, precision))),
      upsample_(std::make_unique<UpsampleNearest2xOp>(*kernels_)),
      copy_(std::make_unique<CopyPlanesOp>(*kernels_)) {
  for_each_conv(model, precision, [this](const ConvSpec& c, Precision p) {
    convs_[c.name] = std::make_unique<Conv2dOp>(*kernels_, shape_of(c), c.weight, c.bias, p);
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
