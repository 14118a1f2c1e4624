// NetworkOps: walks the model description once and uploads every Conv's folded
// weights.
#include "pipeline/executor/network_ops.hpp"

#include "errors.hpp"

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

}  // namespace

NetworkOps::NetworkOps(Backend& backend, const Yolo26Model& model, Precision precision)
    : backend_(backend),
      precision_(precision),
      kernels_(std::make_unique<NnKernels>(backend)),
      upsample_(std::make_unique<UpsampleNearest2xOp>(*kernels_)),
      copy_(std::make_unique<CopyPlanesOp>(*kernels_)) {
  for (const LayerSpec& layer : model.layers) for_each_conv(layer, [this](const ConvSpec& c) { add(c); });
}

void NetworkOps::add(const ConvSpec& spec) {
  Conv2dShape shape{spec.c_in, spec.c_out, spec.kernel, spec.stride, spec.groups, spec.silu};
  convs_[spec.name] = std::make_unique<Conv2dOp>(*kernels_, shape, spec.weight, spec.bias, precision_);
}

const MaxPool2dOp& NetworkOps::pool(int channels, int kernel) {
  auto& op = pools_[{channels, kernel}];
  if (!op) op = std::make_unique<MaxPool2dOp>(*kernels_, channels, kernel);
  return *op;
}

const Conv2dOp& NetworkOps::conv(const ConvSpec& spec) const {
  auto it = convs_.find(spec.name);
  if (it == convs_.end()) throw RuntimeError("no conv op for '" + spec.name + "'");
  return *it->second;
}

}  // namespace lab
