// build_shape_plan: places the activations of every layer (concatenation inputs
// written straight into their channel slice, channel splits read in place, the
// head writing into its anchor range) and records the launches of each module
// as spec/yolo26.md defines it.
#include "pipeline/executor/shape_plan.hpp"

#include <algorithm>

#include "nvrtc_runtime/errors.hpp"

namespace lab {
namespace {

PsaDims psa_dims(const AttentionSpec& a, int batch, int tokens) {
  PsaDims dims;
  dims.batch = batch, dims.num_heads = a.num_heads, dims.key_dim = a.key_dim;
  dims.n = tokens, dims.scale = a.scale;
  return dims;
}

// The one-launch fused forward on small problems (yolo26n at 640, batch 1: 17.8 vs 35.3 us on an H200); on
// large maps or batches each of its CTAs reading every key of its head costs more than the launches it
// saves (batch 32: 215 vs 176 us; 80x80: level). docs/PERFORMANCE.md.
std::string psa_variant(const PsaDims& dims) {
  const bool fused = psa_fused_problem(dims.key_dim).empty() && dims.n <= kPsaFusedMaxTokens &&
                     int64_t(dims.batch_heads()) * dims.n <= kPsaFusedMaxRows;
  return fused ? "fused" : "tiled";
}

// Lanes of the detect head: the main stream plus a box and a class branch for each of three levels.
constexpr size_t kMaxLanes = 7;

class PlanBuilder {
 public:
  PlanBuilder(NetworkOps& ops, ShapePlan& plan)
      : ops_(ops), plan_(plan), measuring_(plan.arena.measuring()) {}

  void build(const Yolo26Model& model);

 private:
  Activation alloc(int channels, int height, int width) {
    return plan_.arena.take_activation(plan_.batch, channels, height, width);
  }
  Activation alloc_like(const Activation& a, int channels) { return alloc(channels, a.height, a.width); }
  void record(std::function<void()> run) { plan_.steps.push_back({layer_, std::move(run)}); }
  // Independent chains on backend lanes (parallel branches of the CUDA graph).
  void fork_lanes(int count) {
    if (measuring_) return;
    Backend& backend = ops_.backend();
    record([&backend, count] { backend.fork_lanes(count); });
  }
  void use_lane(int lane) {
    lane_ = lane;
    if (measuring_) return;
    Backend& backend = ops_.backend();
    record([&backend, lane] { backend.use_lane(lane); });
  }
  void join_lanes() {
    lane_ = 0;
    if (measuring_) return;
    Backend& backend = ops_.backend();
    record([&backend] { backend.join_lanes(); });
  }

  // out = act(conv(in) + b) (+ residual)
  void conv(const ConvSpec& spec, const Activation& in, const Activation& out,
            const Activation* residual = nullptr);
  Activation conv_new(const ConvSpec& spec, const Activation& in);
  void bottleneck(const BottleneckSpec& b, const Activation& in, const Activation& out);
  void c3k(const C3kSpec& s, const Activation& in, const Activation& out);
  void c3k2(const C3k2Spec& s, const Activation& in, const Activation& out);
  void sppf(const SppfSpec& s, const Activation& in, const Activation& out);
  void c2psa(const C2PsaSpec& s, const Activation& in, const Activation& out);
  void psa_block(const PsaBlockSpec& s, const Activation& in, const Activation& out);
  void attention(const AttentionSpec& a, const Activation& qkv, const Activation& merged,
                 const Activation& v);
  void upsample(const Activation& in, const Activation& out);
  void copy(const Activation& in, const Activation& out);
  void detect(const DetectSpec& d, const std::vector<Activation>& levels);

  NetworkOps& ops_;
  ShapePlan& plan_;
  bool measuring_;
  std::string layer_;
  int lane_ = 0;
};

void PlanBuilder::conv(const ConvSpec& spec, const Activation& in, const Activation& out,
                       const Activation* residual) {
  if (in.channels != spec.c_in || out.channels != spec.c_out || out.height != spec.out_size(in.height) ||
      out.width != spec.out_size(in.width))
    throw RuntimeError("plan: conv '" + spec.name + "' shapes do not chain");
  const Conv2dOp& op = ops_.conv(spec);
  const int batch = in.batch, h = in.height, w = in.width;
  plan_.splitk_floats = std::max(plan_.splitk_floats, op.splitk_workspace_floats(batch, h, w));
  if (measuring_) return;
  const ConstPlaneView src = in.cview(), res = residual ? residual->cview() : ConstPlaneView{};
  const PlaneView dst = out.view();
  // One split-K workspace per lane: convs of one lane run one after another, lanes run side by side.
  float* workspace = plan_.splitk_workspace + size_t(lane_) * plan_.splitk_floats;
  record([&op, batch, h, w, src, dst, res, workspace] { op.run(batch, h, w, src, dst, res, workspace); });
}

Activation PlanBuilder::conv_new(const ConvSpec& spec, const Activation& in) {
  Activation out = alloc(spec.c_out, spec.out_size(in.height), spec.out_size(in.width));
  conv(spec, in, out);
  return out;
}

void PlanBuilder::bottleneck(const BottleneckSpec& b, const Activation& in, const Activation& out) {
  Activation t = conv_new(b.cv1, in);
  conv(b.cv2, t, out, b.shortcut && in.channels == out.channels ? &in : nullptr);
}

void PlanBuilder::c3k(const C3kSpec& s, const Activation& in, const Activation& out) {
  const int c_ = s.cv1.c_out;
  Activation cat = alloc_like(in, 2 * c_);
  Activation x = s.m.empty() ? cat.slice(0, c_) : conv_new(s.cv1, in);
  if (s.m.empty()) conv(s.cv1, in, x);
  for (size_t i = 0; i < s.m.size(); ++i) {
    Activation y = i + 1 == s.m.size() ? cat.slice(0, c_) : alloc_like(in, c_);
    bottleneck(s.m[i], x, y);
    x = y;
  }
  conv(s.cv2, in, cat.slice(c_, c_));
  conv(s.cv3, cat, out);
}

void PlanBuilder::c3k2(const C3k2Spec& s, const Activation& in, const Activation& out) {
  const int c = s.hidden, n = int(s.m.size());
  Activation cat = alloc_like(in, (2 + n) * c);
  conv(s.cv1, in, cat.slice(0, 2 * c));
  for (int i = 0; i < n; ++i) {
    const C3k2BlockSpec& block = s.m[size_t(i)];
    Activation x = cat.slice((1 + i) * c, c), y = cat.slice((2 + i) * c, c);
    switch (block.kind) {
      case C3k2BlockSpec::Kind::Bottleneck:
        bottleneck(block.bottleneck, x, y);
        break;
      case C3k2BlockSpec::Kind::C3k:
        c3k(block.c3k, x, y);
        break;
      case C3k2BlockSpec::Kind::BottleneckPsa: {
        Activation t = alloc_like(x, c);
        bottleneck(block.bottleneck, x, t);
        psa_block(block.psa, t, y);
        break;
      }
    }
  }
  conv(s.cv2, cat, out);
}

void PlanBuilder::sppf(const SppfSpec& s, const Activation& in, const Activation& out) {
  const int c_ = s.cv1.c_out;
  Activation cat = alloc_like(in, (1 + s.pools) * c_);
  conv(s.cv1, in, cat.slice(0, c_));
  for (int i = 0; i < s.pools; ++i) {
    if (measuring_) continue;
    const MaxPool2dOp& pool = ops_.pool(c_, s.pool_kernel);
    const ConstPlaneView src = cat.slice(i * c_, c_).cview();
    const PlaneView dst = cat.slice((i + 1) * c_, c_).view();
    const int batch = in.batch, h = in.height, w = in.width;
    record([&pool, batch, h, w, src, dst] { pool.run(batch, h, w, src, dst); });
  }
  conv(s.cv2, cat, out, s.shortcut && in.channels == out.channels ? &in : nullptr);
}

void PlanBuilder::c2psa(const C2PsaSpec& s, const Activation& in, const Activation& out) {
  const int c = s.hidden;
  Activation cat = alloc_like(in, 2 * c);
  conv(s.cv1, in, cat);
  // The last block writes over its own input (the b half): it reads that input
  // only before its final conv.
  Activation x = cat.slice(c, c);
  for (size_t i = 0; i < s.m.size(); ++i) {
    Activation y = i + 1 == s.m.size() ? cat.slice(c, c) : alloc_like(in, c);
    psa_block(s.m[i], x, y);
    x = y;
  }
  conv(s.cv2, cat, out);
}

void PlanBuilder::psa_block(const PsaBlockSpec& s, const Activation& in, const Activation& out) {
  const AttentionSpec& a = s.attn;
  Activation qkv = conv_new(a.qkv, in);  // contiguous [B, nh*(2kd+hd), H, W], as psa.cu reads it
  Activation merged = alloc_like(in, a.dim), v = alloc_like(in, a.dim);
  attention(a, qkv, merged, v);
  Activation y = alloc_like(in, a.dim);
  conv(a.pe, v, y, &merged);  // v @ attn^T + pe(v)
  Activation x1 = alloc_like(in, a.dim);
  conv(a.proj, y, x1, s.shortcut ? &in : nullptr);  // x + attn(x)
  Activation f = conv_new(s.ffn0, x1);
  conv(s.ffn1, f, out, s.shortcut ? &x1 : nullptr);  // x + ffn(x)
}

void PlanBuilder::attention(const AttentionSpec& a, const Activation& qkv, const Activation& merged,
                            const Activation& v) {
  if (a.head_dim != 2 * a.key_dim)
    throw UsageError(a.name + ": head_dim " + std::to_string(a.head_dim) + " is not 2 * key_dim " +
                     std::to_string(a.key_dim) + " (the PSA kernels' [Q | K | V_lo | V_hi] layout)");
  if (measuring_) return;
  const PsaDims dims = psa_dims(a, qkv.batch, int(qkv.plane()));
  auto run = std::make_unique<AttentionRun>();
  run->name = a.name;
  run->op = std::make_unique<PsaOp>(ops_.backend(), psa_variant(dims), dims);
  run->workspace = run->op->workspace();
  AttentionRun* r = run.get();
  plan_.attentions.push_back(std::move(run));
  const float* src = qkv.data;
  float *m = merged.data, *vo = v.data;
  record([r, src, m, vo] { r->op->forward(src, m, vo, r->workspace); });
}

void PlanBuilder::upsample(const Activation& in, const Activation& out) {
  if (out.height != 2 * in.height || out.width != 2 * in.width || out.channels != in.channels)
    throw RuntimeError("plan: upsample shapes do not chain");
  if (measuring_) return;
  const UpsampleNearest2xOp& op = ops_.upsample();
  const int batch = in.batch, c = in.channels, h = in.height, w = in.width;
  const ConstPlaneView src = in.cview();
  const PlaneView dst = out.view();
  record([&op, batch, c, h, w, src, dst] { op.run(batch, c, h, w, src, dst); });
}

void PlanBuilder::copy(const Activation& in, const Activation& out) {
  if (measuring_) return;
  const CopyPlanesOp& op = ops_.copy();
  const int batch = in.batch, c = in.channels;
  const int64_t plane = in.plane();
  const ConstPlaneView src = in.cview();
  const PlaneView dst = out.view();
  record([&op, batch, c, plane, src, dst] { op.run(batch, c, plane, src, dst); });
}

void PlanBuilder::detect(const DetectSpec& d, const std::vector<Activation>& levels) {
  if (1 + 2 * levels.size() > kMaxLanes)
    throw UsageError("detect head with " + std::to_string(levels.size()) +
                     " levels: at most 3 are supported");
  int anchors = 0;
  for (const Activation& l : levels) anchors += int(l.plane());
  const int batch = plan_.batch;
  Activation boxes = alloc(4, 1, anchors), scores = alloc(d.nc, 1, anchors);
  plan_.tensors["head.boxes"] = boxes;
  plan_.tensors["head.scores"] = scores;
  int first = 0;
  // The box and class branches of every level are independent chains of small convs: one lane each.
  fork_lanes(1 + 2 * int(levels.size()));
  for (size_t i = 0; i < levels.size(); ++i) {
    const DetectLevelSpec& level = d.levels[i];
    const Activation& in = levels[i];
    // The level's anchor range of [B, 4, A] / [B, nc, A], seen as a [B, C, h,
    // w] view with channel stride A.
    auto range = [&](const Activation& head) {
      Activation v = head;
      v.data = head.data + first;
      v.height = in.height, v.width = in.width;
      return v;
    };
    use_lane(1 + 2 * int(i));
    Activation x = in;
    for (size_t j = 0; j + 1 < level.box.size(); ++j) x = conv_new(level.box[j], x);
    conv(level.box.back(), x, range(boxes));
    use_lane(2 + 2 * int(i));
    x = in;
    for (size_t j = 0; j + 1 < level.cls.size(); ++j) x = conv_new(level.cls[j], x);
    conv(level.cls.back(), x, range(scores));
    first += int(in.plane());
  }
  join_lanes();
  Activation decoded = alloc(4, 1, anchors);
  plan_.max_det = std::min(d.max_det, anchors);
  plan_.detections = plan_.arena.take(size_t(batch) * plan_.max_det * 6);
  if (measuring_) return;
  layer_ = "decode";
  const DetectDecodeOp* dec = &ops_.decode(plan_.height, plan_.width);
  const float* raw = boxes.data;
  float* out = decoded.data;
  record([dec, raw, batch, out] { dec->decode(raw, batch, out); });
  layer_ = "topk";
  plan_.topk = std::make_unique<TopkPostprocessOp>(ops_.backend(), anchors, d.nc, d.max_det, batch);
  TopkPostprocessOp* topk = plan_.topk.get();
  const float *dec_boxes = decoded.data, *logits = scores.data;
  float* dets = plan_.detections;
  record([topk, batch, dec_boxes, logits, dets] { topk->run(batch, dec_boxes, logits, dets); });
}

std::string layer_name(int index) {
  return std::string("layer") + (index < 10 ? "0" : "") + std::to_string(index);
}

void PlanBuilder::build(const Yolo26Model& model) {
  const size_t n_layers = model.layers.size();
  auto resolve = [&](int from, int self) { return from < 0 ? self + from : from; };
  auto size_of = [&](const LayerSpec& l) {
    return std::pair{plan_.height / l.stride, plan_.width / l.stride};
  };
  // Concatenations first: each input layer that feeds exactly one concat writes
  // into its slice.
  std::vector<Activation> outputs(n_layers);
  std::vector<bool> placed(n_layers, false);
  std::vector<std::vector<std::pair<int, Activation>>> copies(n_layers);
  for (const LayerSpec& l : model.layers) {
    if (l.kind != LayerSpec::Kind::Concat) continue;
    auto [h, w] = size_of(l);
    Activation cat = alloc(l.out_channels, h, w);
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
  Activation input = alloc(3, plan_.height, plan_.width);
  plan_.tensors["input"] = input;
  for (const LayerSpec& l : model.layers) {
    const size_t i = size_t(l.index);
    layer_ = layer_name(l.index);
    if (l.kind != LayerSpec::Kind::Detect && !placed[i]) {
      auto [h, w] = size_of(l);
      outputs[i] = alloc(l.out_channels, h, w);
    }
    const int first_input = l.from.empty() ? -1 : resolve(l.from[0], l.index);
    const Activation in = first_input < 0 ? input : outputs[size_t(first_input)];
    const Activation& out = outputs[i];
    switch (l.kind) {
      case LayerSpec::Kind::Conv:
        conv(l.conv, in, out);
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
        upsample(in, out);
        break;
      case LayerSpec::Kind::Concat:
        for (auto& [src, slice] : copies[i]) copy(outputs[size_t(src)], slice);
        break;
      case LayerSpec::Kind::Detect: {
        std::vector<Activation> levels;
        for (int f : l.from) levels.push_back(outputs[size_t(resolve(f, l.index))]);
        detect(l.detect, levels);
        continue;
      }
    }
    plan_.tensors[layer_] = out;
  }
}

void check_input_shape(int batch, int height, int width) {
  if (batch < 1 || height <= 0 || width <= 0 || height % 32 || width % 32)
    throw UsageError("input shape " + std::to_string(batch) + "x3x" + std::to_string(height) + "x" +
                     std::to_string(width) + " is invalid: batch >= 1, height and width multiples of 32");
}

}  // namespace

std::vector<CompileRequest> plan_compile_requests(const Yolo26Model& model, int batch, int height, int width) {
  check_input_shape(batch, height, width);
  std::vector<CompileRequest> requests;
  auto add = [&](const AttentionSpec& a, const LayerSpec& l) {
    const PsaDims dims = psa_dims(a, batch, (height / l.stride) * (width / l.stride));
    for (CompileRequest& r : psa_compile_requests(psa_variant(dims), dims))
      if (std::find(requests.begin(), requests.end(), r) == requests.end()) requests.push_back(std::move(r));
  };
  for (const LayerSpec& l : model.layers) {
    if (l.kind == LayerSpec::Kind::C2Psa)
      for (const PsaBlockSpec& p : l.c2psa.m) add(p.attn, l);
    if (l.kind == LayerSpec::Kind::C3k2)
      for (const C3k2BlockSpec& block : l.c3k2.m)
        if (block.kind == C3k2BlockSpec::Kind::BottleneckPsa) add(block.psa.attn, l);
  }
  return requests;
}

std::unique_ptr<ShapePlan> build_shape_plan(NetworkOps& ops, const Yolo26Model& model, int batch, int height,
                                            int width) {
  check_input_shape(batch, height, width);
  auto plan = std::make_unique<ShapePlan>();
  plan->batch = batch, plan->height = height, plan->width = width;
  PlanBuilder(ops, *plan).build(model);               // measuring pass: sizes only
  plan->arena.take(plan->splitk_floats * kMaxLanes);  // split-K workspaces, taken first in the real pass
  plan->arena.allocate(ops.backend());
  plan->steps.clear();
  plan->tensors.clear();
  plan->splitk_workspace = plan->arena.take(plan->splitk_floats * kMaxLanes);
  PlanBuilder(ops, *plan).build(model);
  return plan;
}

}  // namespace lab
