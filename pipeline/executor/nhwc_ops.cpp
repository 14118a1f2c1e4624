// NhwcOps: walks the model description once, uploading each conv's folded weights for the NHWC kernels (the
// head's last convs padded to 8 output channels).
#include "pipeline/executor/nhwc_ops.hpp"

#include <algorithm>
#include <cstdlib>

#include "kernels/detect/anchor_grid.hpp"
#include "kernels/detect/topk_postprocess.hpp"
#include "nvrtc_runtime/errors.hpp"
#include "pipeline/executor/model_walk.hpp"
#include "pipeline/executor/network_ops.hpp"

namespace lab {
namespace {

// The names of the Detect head's last 1x1 convs (box -> 4, class -> nc), whose outputs get padded.
std::set<std::string> head_outputs(const Yolo26Model& model) {
  std::set<std::string> names;
  for (const LayerSpec& l : model.layers)
    if (l.kind == LayerSpec::Kind::Detect)
      for (const DetectLevelSpec& level : l.detect.levels)
        names.insert({level.box.back().name, level.cls.back().name});
  return names;
}

// A copy of `c` with its outputs padded to a multiple of 8 by zero weights and biases.
ConvSpec padded_outputs(const ConvSpec& c) {
  ConvSpec p = c;
  p.c_out = nhwc_min_pitch(c.c_out);
  p.weight.resize(size_t(p.c_out) * c.c_in / c.groups * c.kernel * c.kernel, 0.0f);
  p.bias.resize(size_t(p.c_out), 0.0f);
  return p;
}

// Each conv of the NHWC network as its kernel runs it: depthwise convs as they are, dense ones with the
// head's outputs padded.
template <class F>
void for_each_nhwc_conv(const Yolo26Model& model, F&& f) {
  const std::set<std::string> padded = head_outputs(model);
  for (const LayerSpec& l : model.layers)
    for_each_conv(l, [&](const ConvSpec& c) { f(padded.count(c.name) ? padded_outputs(c) : c); });
}

// The block_n the network builds a dense conv with under conv_block_n_from_env()'s `forced` BN (0: auto): the
// tile rule's BN where that is not wider.
int network_block_n(ActivationType type, const Conv2dShape& s, int forced) {
  return forced ? std::min(forced, conv2d_nhwc_tiles(type, s.c_in, s.c_out).bn) : 0;
}

}  // namespace

const ConvSpec* float_stem(const Yolo26Model& model) {
  if (model.layers.empty() || model.layers[0].kind != LayerSpec::Kind::Conv) return nullptr;
  const ConvSpec& c = model.layers[0].conv;
  return conv2d_stem_nhwc_problem(conv_shape(c)).empty() ? &c : nullptr;
}

ActivationType nhwc_activation_type(Precision precision) {
  if (precision == Precision::Fp16) return ActivationType::f16;
  if (precision == Precision::Bf16) return ActivationType::bf16;
  if (precision == Precision::Tf32) return ActivationType::tf32;
  return ActivationType::f32;
}

int conv_split_limit_from_env() {
  const char* value = std::getenv("LAB_CONV_SPLIT_K");
  if (!value || !*value) return 1;  // off: slower on the H200 at every layer measured (docs/kernels/nn.md)
  const std::string text = value;
  if (text.size() <= 2 &&
      std::all_of(text.begin(), text.end(), [](char c) { return c >= '0' && c <= '9'; })) {
    const int limit = std::stoi(text);
    if (limit <= 64) return std::max(limit, 1);
  }
  throw UsageError("LAB_CONV_SPLIT_K must be 0 or 1 (no split-K) or the largest split 2..64, not '" + text +
                   "'");
}

int conv_block_n_from_env() {
  const char* value = std::getenv("LAB_CONV_BLOCK_N");
  const std::string text = value ? value : "";
  if (text.empty() || text == "auto") return 0;
  if (text == "64" || text == "128") return std::stoi(text);
  throw UsageError("LAB_CONV_BLOCK_N must be auto (or unset), 64 or 128, not '" + text + "'");
}

std::vector<CompileRequest> NhwcOps::compile_requests(const Yolo26Model& model, Precision precision) {
  const ActivationType type = nhwc_activation_type(precision);
  std::vector<CompileRequest> requests{nhwc_layers_compile_request(type)};
  const ConvSpec* stem = float_stem(model);
  const int forced_block_n = conv_block_n_from_env();
  for_each_nhwc_conv(model, [&](const ConvSpec& c) {
    if (c.groups != 1) return;
    const Conv2dShape s = conv_shape(c);
    CompileRequest r = stem && c.name == stem->name
                           ? conv2d_stem_nhwc_compile_request(type, s)
                           : conv2d_nhwc_compile_request(type, s, network_block_n(type, s, forced_block_n));
    if (std::find(requests.begin(), requests.end(), r) == requests.end()) requests.push_back(std::move(r));
  });
  requests.push_back(detect_decode_spec().compile_request("v1_fused", {}));
  requests.push_back(topk_postprocess_spec().compile_request("v1_radix_bitonic", {}));
  return requests;
}

NhwcOps::NhwcOps(Backend& backend, const Yolo26Model& model, Precision precision)
    : backend_(backend),
      conv_split_limit_(conv_split_limit_from_env()),
      layers_(backend, nhwc_activation_type(precision)) {
  const ConvSpec* stem = float_stem(model);
  const int forced_block_n = conv_block_n_from_env();
  for_each_nhwc_conv(model, [&](const ConvSpec& c) {
    const Conv2dShape s = conv_shape(c);
    if (stem && c.name == stem->name) {
      stem_name_ = c.name;
      stem_ = std::make_unique<Conv2dStemNhwcOp>(backend_, s, type(), c.weight, c.bias);
    } else if (c.groups == 1)
      convs_[c.name] = std::make_unique<Conv2dNhwcOp>(backend_, s, type(), c.weight, c.bias,
                                                      network_block_n(type(), s, forced_block_n));
    else
      depthwise_[c.name] = std::make_unique<NhwcDepthwise>(layers_, c.c_in, c.weight, c.bias, c.silu);
  });
}

const Conv2dNhwcOp& NhwcOps::conv(const ConvSpec& spec) const {
  auto it = convs_.find(spec.name);
  if (it == convs_.end()) throw RuntimeError("no NHWC conv op for '" + spec.name + "'");
  return *it->second;
}

const NhwcDepthwise& NhwcOps::depthwise(const ConvSpec& spec) const {
  auto it = depthwise_.find(spec.name);
  if (it == depthwise_.end()) throw RuntimeError("no NHWC depthwise op for '" + spec.name + "'");
  return *it->second;
}

const DetectDecodeOp& NhwcOps::decode(int height, int width) {
  auto& op = decodes_[{height, width}];
  if (!op) op = std::make_unique<DetectDecodeOp>(backend_, make_anchor_grid(height, width));
  return *op;
}

}  // namespace lab
