// for_each_conv: one walk over the module structure, written once for the const and the mutable model.
#include "pipeline/model/model_convs.hpp"

namespace lab {

namespace {

template <class Visit>
struct ConvWalk {
  Visit& visit;

  template <class Bottleneck>
  void bottleneck(Bottleneck& b) {
    visit(b.cv1);
    visit(b.cv2);
  }
  template <class Psa>
  void psa(Psa& p) {
    visit(p.attn.qkv);
    visit(p.attn.proj);
    visit(p.attn.pe);
    visit(p.ffn0);
    visit(p.ffn1);
  }
  template <class C3k2>
  void c3k2(C3k2& s) {
    visit(s.cv1);
    visit(s.cv2);
    for (auto& block : s.m) switch (block.kind) {
        case C3k2BlockSpec::Kind::Bottleneck:
          bottleneck(block.bottleneck);
          break;
        case C3k2BlockSpec::Kind::C3k:
          visit(block.c3k.cv1);
          visit(block.c3k.cv2);
          visit(block.c3k.cv3);
          for (auto& b : block.c3k.m) bottleneck(b);
          break;
        case C3k2BlockSpec::Kind::BottleneckPsa:
          bottleneck(block.bottleneck);
          psa(block.psa);
          break;
      }
  }
  template <class Levels>
  void head(Levels& levels) {
    for (auto& level : levels)
      for (auto& conv : level.box) visit(conv);
    for (auto& level : levels)
      for (auto& conv : level.cls) visit(conv);
  }
  template <class Layer>
  void layer(Layer& l) {
    switch (l.kind) {
      case LayerSpec::Kind::Conv:
        visit(l.conv);
        break;
      case LayerSpec::Kind::C3k2:
        c3k2(l.c3k2);
        break;
      case LayerSpec::Kind::Sppf:
        visit(l.sppf.cv1);
        visit(l.sppf.cv2);
        break;
      case LayerSpec::Kind::C2Psa:
        visit(l.c2psa.cv1);
        visit(l.c2psa.cv2);
        for (auto& p : l.c2psa.m) psa(p);
        break;
      case LayerSpec::Kind::Detect:
        head(l.detect.one2many);
        head(l.detect.levels);
        break;
      case LayerSpec::Kind::Upsample:
      case LayerSpec::Kind::Concat:
        break;
    }
  }
};

template <class Model, class Visit>
void walk(Model& model, Visit& visit) {
  ConvWalk<Visit> w{visit};
  for (auto& layer : model.layers) w.layer(layer);
}

}  // namespace

void for_each_conv(const Yolo26Model& model, const std::function<void(const ConvSpec&)>& visit) {
  walk(model, visit);
}

void for_each_conv(Yolo26Model& model, const std::function<void(ConvSpec&)>& visit) {
  walk(model, visit);
}

}  // namespace lab
