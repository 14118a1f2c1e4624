// Yolo26Model::from_checkpoint: walks the fixed topology of yolo26.yaml (24 layers), reading each module's
// weights with the channels its producers deliver, so every convolution's c_in, every concat and the class
// count are checked against the state dict. Widths, repeats and block kinds come from the checkpoint alone.
#include "pipeline/model/yolo26_model.hpp"

#include "pipeline/model/module_readers.hpp"
#include "pipeline/model/state_dict_reader.hpp"

namespace lab {

namespace {

using Kind = LayerSpec::Kind;
using model_detail::Grouping;
using model_detail::StateDictReader;

struct LayerPlan {
  Kind kind;
  std::vector<int> from;
};

// yolo26.yaml: backbone 0..10, head 11..23 (every top-level Conv is k3 s2, every Upsample x2).
const std::vector<LayerPlan>& yolo26_plan() {
  static const std::vector<LayerPlan> plan = {
      {Kind::Conv, {-1}},       {Kind::Conv, {-1}},  {Kind::C3k2, {-1}},
      {Kind::Conv, {-1}},       {Kind::C3k2, {-1}},  {Kind::Conv, {-1}},
      {Kind::C3k2, {-1}},       {Kind::Conv, {-1}},  {Kind::C3k2, {-1}},
      {Kind::Sppf, {-1}},       {Kind::C2Psa, {-1}}, {Kind::Upsample, {-1}},
      {Kind::Concat, {-1, 6}},  {Kind::C3k2, {-1}},  {Kind::Upsample, {-1}},
      {Kind::Concat, {-1, 4}},  {Kind::C3k2, {-1}},  {Kind::Conv, {-1}},
      {Kind::Concat, {-1, 13}}, {Kind::C3k2, {-1}},  {Kind::Conv, {-1}},
      {Kind::Concat, {-1, 10}}, {Kind::C3k2, {-1}},  {Kind::Detect, {16, 19, 22}},
  };
  return plan;
}

// The scale letter from the first conv's width and layer 2's repeats (n/s/m share depth 0.5; l, x 1.0).
std::string derive_scale(const LayerSpec& first_conv, const LayerSpec& first_c3k2) {
  const int width = first_conv.out_channels;
  const size_t repeats = first_c3k2.c3k2.m.size();
  if (repeats == 1 && width == 16) return "n";
  if (repeats == 1 && width == 32) return "s";
  if (repeats == 1 && width == 64) return "m";
  if (repeats == 2 && width == 64) return "l";
  if (repeats == 2 && width == 96) return "x";
  return "";
}

LayerSpec read_layer(const StateDictReader& sd, int index, const LayerPlan& plan,
                     const std::vector<LayerSpec>& done, int input_channels) {
  LayerSpec layer;
  layer.index = index;
  layer.kind = plan.kind;
  layer.from = plan.from;
  auto source = [&](int from) -> const LayerSpec& { return done[size_t(from < 0 ? index + from : from)]; };
  const int c_in = index == 0 ? input_channels : source(plan.from[0]).out_channels;
  const int stride_in = index == 0 ? 1 : source(plan.from[0]).stride;
  const std::string prefix = "model." + std::to_string(index);
  layer.stride = stride_in;
  switch (plan.kind) {
    case Kind::Conv:
      layer.conv = sd.conv(prefix, c_in, Grouping::Dense, true, 2);
      layer.out_channels = layer.conv.c_out;
      layer.stride = stride_in * 2;
      break;
    case Kind::C3k2:
      layer.c3k2 = model_detail::read_c3k2(sd, prefix, c_in);
      layer.out_channels = layer.c3k2.cv2.c_out;
      break;
    case Kind::Sppf:
      layer.sppf = model_detail::read_sppf(sd, prefix, c_in);
      layer.out_channels = layer.sppf.cv2.c_out;
      break;
    case Kind::C2Psa:
      layer.c2psa = model_detail::read_c2psa(sd, prefix, c_in);
      layer.out_channels = layer.c2psa.cv2.c_out;
      break;
    case Kind::Upsample:
      layer.out_channels = c_in;
      layer.stride = stride_in / 2;
      break;
    case Kind::Concat:
      for (int from : plan.from) layer.out_channels += source(from).out_channels;
      break;
    case Kind::Detect: {
      std::vector<int> channels, strides;
      for (int from : plan.from) {
        channels.push_back(source(from).out_channels);
        strides.push_back(source(from).stride);
      }
      layer.detect = model_detail::read_detect(sd, prefix, channels, strides);
      layer.out_channels = 4 + layer.detect.nc;
      layer.stride = strides.back();
      break;
    }
  }
  return layer;
}

}  // namespace

Yolo26Model Yolo26Model::from_checkpoint(const Checkpoint& checkpoint) {
  const StateDictReader sd(checkpoint);
  Yolo26Model model;
  model.source = checkpoint.path.string();
  const auto& plan = yolo26_plan();
  for (size_t i = 0; i < plan.size(); ++i)
    model.layers.push_back(read_layer(sd, int(i), plan[i], model.layers, 3));

  const DetectSpec& detect = model.layers.back().detect;
  const std::string class_conv = "model.23.one2one_cv3.0.2.weight";
  if (checkpoint.nc > 0 && checkpoint.nc != detect.nc)
    sd.fail_shape(class_conv, "the checkpoint declares nc = " + std::to_string(checkpoint.nc));
  if (!checkpoint.class_names.empty() && int(checkpoint.class_names.size()) != detect.nc)
    sd.fail_shape(class_conv,
                  "the checkpoint names " + std::to_string(checkpoint.class_names.size()) + " classes");
  model.nc = detect.nc;
  model.class_names = checkpoint.class_names;
  model.scale = checkpoint.scale.empty() ? derive_scale(model.layers[0], model.layers[2]) : checkpoint.scale;
  return model;
}

std::vector<const AttentionSpec*> Yolo26Model::attentions() const {
  std::vector<const AttentionSpec*> out;
  for (const LayerSpec& layer : layers) {
    if (layer.kind == Kind::C2Psa)
      for (const PsaBlockSpec& block : layer.c2psa.m) out.push_back(&block.attn);
    if (layer.kind == Kind::C3k2)
      for (const C3k2BlockSpec& block : layer.c3k2.m)
        if (block.kind == C3k2BlockSpec::Kind::BottleneckPsa) out.push_back(&block.psa.attn);
  }
  return out;
}

const AttentionSpec* Yolo26Model::attention(const std::string& name) const {
  for (const AttentionSpec* a : attentions())
    if (a->name == name) return a;
  return nullptr;
}

}  // namespace lab
