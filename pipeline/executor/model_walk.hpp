// The walk over a model description's convolutions (every ConvSpec of every module, in network order), and
// the same walk with the precision the policy gives each conv's role, and the walk over its attentions: shared by the network's ops of both
// activation layouts and the layout check.
#pragma once
#include "pipeline/executor/precision_policy.hpp"
#include "pipeline/model/yolo26_model.hpp"

namespace lab {

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

// Every PSA attention of the model with its layer (C2PSA blocks and C3k2's Bottleneck + PSABlock).
template <class F>
void for_each_attention(const Yolo26Model& model, F&& f) {
  for (const LayerSpec& l : model.layers) {
    if (l.kind == LayerSpec::Kind::C2Psa)
      for (const PsaBlockSpec& p : l.c2psa.m) f(p.attn, l);
    if (l.kind == LayerSpec::Kind::C3k2)
      for (const C3k2BlockSpec& block : l.c3k2.m)
        if (block.kind == C3k2BlockSpec::Kind::BottleneckPsa) f(block.psa.attn, l);
  }
}

}  // namespace lab
