// The layout-free half of a plan builder: the recorded steps tagged with their layer, the backend lanes of the
// detect head, the decode / top-k tail, and the walk over spec/yolo26.md's modules (where each activation
// lives: concatenation inputs straight in their slice, C2f chunks and SPPF pools read and written in place,
// the PSA block's chain). A layout's builder (shape_plan.cpp: float32 NCHW; nhwc_plan.cpp: 16-bit NHWC)
// derives from PlanWalk<Builder, Tensor> and supplies the tensor type (slice(first, count), batch, channels,
// height, width) and the primitives: alloc, conv (dense or depthwise, optional residual), pool, attention,
// upsample, copy and detect.
#pragma once
#include <algorithm>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "kernels/detect/detect_decode.hpp"
#include "kernels/detect/topk_postprocess.hpp"
#include "nvrtc_runtime/backend.hpp"
#include "nvrtc_runtime/errors.hpp"
#include "pipeline/executor/shape_plan.hpp"

namespace lab {

// Lanes of the detect head: the main stream plus a box and a class branch for each of three levels.
inline constexpr size_t kMaxLanes = 7;

std::string layer_name(int index);  // "layer00".."layer23"
// The attention problem of a PSA block over `tokens` positions.
PsaDims psa_dims(const AttentionSpec& a, int batch, int tokens);
// UsageError unless batch >= 1 and height and width are positive multiples of 32.
void check_input_shape(int batch, int height, int width);

// Steps, lanes and the detect tail of a plan being built (or measured: no buffers yet, nothing recorded).
class PlanRecorder {
 public:
  PlanRecorder(Backend& backend, ShapePlan& plan)
      : backend_(backend), plan_(plan), measuring_(plan.arena.measuring()) {}

 protected:
  void record(std::function<void()> run) { plan_.steps.push_back({layer_, std::move(run)}); }
  // Independent chains on backend lanes (parallel branches of the CUDA graph).
  void fork_lanes(int count);
  void use_lane(int lane);
  void join_lanes();
  // The float [B, 4, A] box distances and [B, nc, A] logits of the head, then the decode and the top-k.
  std::pair<Activation, Activation> head_outputs(int anchors, int nc);
  // decode_op is called only when recording (it may compile the decode on first use).
  void detect_tail(const DetectSpec& d, const std::function<const DetectDecodeOp&()>& decode_op,
                   const Activation& boxes, const Activation& scores);

  Backend& backend_;
  ShapePlan& plan_;
  bool measuring_;
  std::string layer_;
  int lane_ = 0;
};

template <class Builder, class Tensor>
class PlanWalk : public PlanRecorder {
 public:
  using PlanRecorder::PlanRecorder;

  // Places and records every layer of `model` over the plan's input tensor.
  void walk(const Yolo26Model& model, const Tensor& input);

 protected:
  Tensor alloc_like(const Tensor& a, int channels) { return self().alloc(channels, a.height, a.width); }
  Tensor conv_new(const ConvSpec& spec, const Tensor& in) {
    Tensor out = self().alloc(spec.c_out, spec.out_size(in.height), spec.out_size(in.width));
    self().conv(spec, in, out, nullptr);
    return out;
  }
  void bottleneck(const BottleneckSpec& b, const Tensor& in, const Tensor& out) {
    Tensor t = conv_new(b.cv1, in);
    self().conv(b.cv2, t, out, b.shortcut && in.channels == out.channels ? &in : nullptr);
  }
  void c3k(const C3kSpec& s, const Tensor& in, const Tensor& out);
  void c3k2(const C3k2Spec& s, const Tensor& in, const Tensor& out);
  void sppf(const SppfSpec& s, const Tensor& in, const Tensor& out);
  void c2psa(const C2PsaSpec& s, const Tensor& in, const Tensor& out);
  void psa_block(const PsaBlockSpec& s, const Tensor& in, const Tensor& out);

 private:
  Builder& self() { return static_cast<Builder&>(*this); }
};

template <class Builder, class Tensor>
void PlanWalk<Builder, Tensor>::c3k(const C3kSpec& s, const Tensor& in, const Tensor& out) {
  const int c_ = s.cv1.c_out;
  Tensor cat = alloc_like(in, 2 * c_);
  Tensor x = s.m.empty() ? cat.slice(0, c_) : conv_new(s.cv1, in);
  if (s.m.empty()) self().conv(s.cv1, in, x, nullptr);
  for (size_t i = 0; i < s.m.size(); ++i) {
    Tensor y = i + 1 == s.m.size() ? cat.slice(0, c_) : alloc_like(in, c_);
    bottleneck(s.m[i], x, y);
    x = y;
  }
  self().conv(s.cv2, in, cat.slice(c_, c_), nullptr);
  self().conv(s.cv3, cat, out, nullptr);
}

template <class Builder, class Tensor>
void PlanWalk<Builder, Tensor>::c3k2(const C3k2Spec& s, const Tensor& in, const Tensor& out) {
  const int c = s.hidden, n = int(s.m.size());
  Tensor cat = alloc_like(in, (2 + n) * c);
  self().conv(s.cv1, in, cat.slice(0, 2 * c), nullptr);
  for (int i = 0; i < n; ++i) {
    const C3k2BlockSpec& block = s.m[size_t(i)];
    Tensor x = cat.slice((1 + i) * c, c), y = cat.slice((2 + i) * c, c);
    switch (block.kind) {
      case C3k2BlockSpec::Kind::Bottleneck:
        bottleneck(block.bottleneck, x, y);
        break;
      case C3k2BlockSpec::Kind::C3k:
        c3k(block.c3k, x, y);
        break;
      case C3k2BlockSpec::Kind::BottleneckPsa: {
        Tensor t = alloc_like(x, c);
        bottleneck(block.bottleneck, x, t);
        psa_block(block.psa, t, y);
        break;
      }
    }
  }
  self().conv(s.cv2, cat, out, nullptr);
}

template <class Builder, class Tensor>
void PlanWalk<Builder, Tensor>::sppf(const SppfSpec& s, const Tensor& in, const Tensor& out) {
  const int c_ = s.cv1.c_out;
  Tensor cat = alloc_like(in, (1 + s.pools) * c_);
  self().conv(s.cv1, in, cat.slice(0, c_), nullptr);
  for (int i = 0; i < s.pools; ++i) self().pool(s.pool_kernel, cat.slice(i * c_, c_), cat.slice((i + 1) * c_, c_));
  self().conv(s.cv2, cat, out, s.shortcut && in.channels == out.channels ? &in : nullptr);
}

template <class Builder, class Tensor>
void PlanWalk<Builder, Tensor>::c2psa(const C2PsaSpec& s, const Tensor& in, const Tensor& out) {
  const int c = s.hidden;
  Tensor cat = alloc_like(in, 2 * c);
  self().conv(s.cv1, in, cat, nullptr);
  // The last block writes over its own input (the b half): it reads that input only before its final conv.
  Tensor x = cat.slice(c, c);
  for (size_t i = 0; i < s.m.size(); ++i) {
    Tensor y = i + 1 == s.m.size() ? cat.slice(c, c) : alloc_like(in, c);
    psa_block(s.m[i], x, y);
    x = y;
  }
  self().conv(s.cv2, cat, out, nullptr);
}

template <class Builder, class Tensor>
void PlanWalk<Builder, Tensor>::psa_block(const PsaBlockSpec& s, const Tensor& in, const Tensor& out) {
  const AttentionSpec& a = s.attn;
  if (a.head_dim != 2 * a.key_dim)
    throw UsageError(a.name + ": head_dim " + std::to_string(a.head_dim) + " is not 2 * key_dim " +
                     std::to_string(a.key_dim) + " (the PSA kernels' [Q | K | V_lo | V_hi] layout)");
  Tensor qkv = conv_new(a.qkv, in);
  Tensor merged = alloc_like(in, a.dim), v = alloc_like(in, a.dim);
  self().attention(a, qkv, merged, v);
  Tensor y = alloc_like(in, a.dim);
  self().conv(a.pe, v, y, &merged);  // v @ attn^T + pe(v)
  Tensor x1 = alloc_like(in, a.dim);
  self().conv(a.proj, y, x1, s.shortcut ? &in : nullptr);  // x + attn(x)
  Tensor f = conv_new(s.ffn0, x1);
  self().conv(s.ffn1, f, out, s.shortcut ? &x1 : nullptr);  // x + ffn(x)
}

template <class Builder, class Tensor>
void PlanWalk<Builder, Tensor>::walk(const Yolo26Model& model, const Tensor& input) {
  const size_t n_layers = model.layers.size();
  auto resolve = [](int from, int self) { return from < 0 ? self + from : from; };
  auto alloc_layer = [&](const LayerSpec& l) {
    return self().alloc(l.out_channels, plan_.height / l.stride, plan_.width / l.stride);
  };
  // Concatenations first: each input layer that feeds exactly one concat writes into its slice.
  std::vector<Tensor> outputs(n_layers);
  std::vector<bool> placed(n_layers, false);
  std::vector<std::vector<std::pair<int, Tensor>>> copies(n_layers);
  for (const LayerSpec& l : model.layers) {
    if (l.kind != LayerSpec::Kind::Concat) continue;
    Tensor cat = alloc_layer(l);
    outputs[size_t(l.index)] = cat;
    placed[size_t(l.index)] = true;
    int offset = 0;
    for (int f : l.from) {
      const int src = resolve(f, l.index);
      const int channels = model.layers[size_t(src)].out_channels;
      if (!placed[size_t(src)]) {
        outputs[size_t(src)] = cat.slice(offset, channels);
        placed[size_t(src)] = true;
      } else {
        copies[size_t(l.index)].push_back({src, cat.slice(offset, channels)});
      }
      offset += channels;
    }
  }
  for (const LayerSpec& l : model.layers) {
    const size_t i = size_t(l.index);
    layer_ = layer_name(l.index);
    if (l.kind != LayerSpec::Kind::Detect && !placed[i]) outputs[i] = alloc_layer(l);
    const int first_input = l.from.empty() ? -1 : resolve(l.from[0], l.index);
    const Tensor in = first_input < 0 ? input : outputs[size_t(first_input)];
    const Tensor& out = outputs[i];
    switch (l.kind) {
      case LayerSpec::Kind::Conv:
        self().conv(l.conv, in, out, nullptr);
        break;
      case LayerSpec::Kind::C3k2:
        c3k2(l.c3k2, in, out);
        break;
      case LayerSpec::Kind::Sppf:
        sppf(l.sppf, in, out);
        break;
      case LayerSpec::Kind::C2Psa:
        c2psa(l.c2psa, in, out);
        break;
      case LayerSpec::Kind::Upsample:
        if (out.height != 2 * in.height || out.width != 2 * in.width || out.channels != in.channels)
          throw RuntimeError("plan: upsample shapes do not chain");
        self().upsample(in, out);
        break;
      case LayerSpec::Kind::Concat:
        for (auto& [src, slice] : copies[i]) self().copy(outputs[size_t(src)], slice);
        break;
      case LayerSpec::Kind::Detect: {
        std::vector<Tensor> levels;
        for (int f : l.from) levels.push_back(outputs[size_t(resolve(f, l.index))]);
        if (1 + 2 * levels.size() > kMaxLanes)
          throw UsageError("detect head with " + std::to_string(levels.size()) +
                           " levels: at most 3 are supported");
        self().detect(l.detect, levels);
        continue;
      }
    }
    self().name_tensor(layer_, out);
  }
}

}  // namespace lab
