// build_nhwc_plan: the NHWC network's primitives for PlanWalk (placement and module structure are shared
// with the NCHW plan), and the Detect head's padded last convs converted to float planes.
#include "pipeline/executor/nhwc_plan.hpp"

#include <algorithm>

#include "kernels/attention/psa_tf32_nhwc_op.hpp"
#include "nvrtc_runtime/errors.hpp"
#include "pipeline/executor/model_walk.hpp"
#include "pipeline/executor/plan_walk.hpp"

namespace lab {
namespace {

class NhwcPlanBuilder : public PlanWalk<NhwcPlanBuilder, NhwcActivation> {
 public:
  NhwcPlanBuilder(NhwcOps& ops, ShapePlan& plan) : PlanWalk(ops.backend(), plan), ops_(ops) {}

  void build(const Yolo26Model& model);

  // The primitives PlanWalk walks the modules with.
  NhwcActivation alloc(int channels, int height, int width) {
    return take_nhwc(plan_.arena, ops_.type(), plan_.batch, channels, height, width);
  }
  void name_tensor(const std::string& name, const NhwcActivation& a) { plan_.nhwc_tensors[name] = a; }
  // out = act(conv(in) + b) (+ residual): dense through conv2d_nhwc, depthwise through nhwc_layers.
  void conv(const ConvSpec& spec, const NhwcActivation& in, const NhwcActivation& out,
            const NhwcActivation* residual);
  void pool(int kernel, const NhwcActivation& in, const NhwcActivation& out);
  void attention(const AttentionSpec& a, const NhwcActivation& qkv, const NhwcActivation& merged,
                 const NhwcActivation& v);
  void upsample(const NhwcActivation& in, const NhwcActivation& out);
  void copy(const NhwcActivation& in, const NhwcActivation& out);
  void detect(const DetectSpec& d, const std::vector<NhwcActivation>& levels);

 private:
  NhwcOps& ops_;
  const float* float_input_ = nullptr;  // the plan's float NCHW input, which the stem op reads
};

void NhwcPlanBuilder::build(const Yolo26Model& model) {
  const Activation input = plan_.arena.take_activation(plan_.batch, 3, plan_.height, plan_.width);
  plan_.tensors["input"] = input;
  float_input_ = input.data;
  if (ops_.has_stem()) {
    // The stem op reads the float input itself: the walk's input is only its shape.
    NhwcActivation shape;
    shape.batch = plan_.batch, shape.channels = 3, shape.height = plan_.height, shape.width = plan_.width;
    walk(model, shape);
    return;
  }
  const NhwcActivation packed = alloc(3, plan_.height, plan_.width);
  layer_ = layer_name(0);  // the packing counts to the first layer's time
  if (!measuring_) {
    const NhwcLayerOps& layers = ops_.layers();
    const int batch = plan_.batch, h = plan_.height, w = plan_.width;
    const float* src = input.data;
    const NhwcView dst = packed.view();
    record([&layers, batch, h, w, src, dst] { layers.pack_input(batch, h, w, src, dst); });
  }
  walk(model, packed);
}

void NhwcPlanBuilder::conv(const ConvSpec& spec, const NhwcActivation& in, const NhwcActivation& out,
                           const NhwcActivation* residual) {
  const bool dense = spec.groups == 1 && !ops_.stem(spec);
  const int c_out = dense ? ops_.conv(spec).shape().c_out : spec.c_out;  // the head's padded
  if (in.channels != spec.c_in || out.channels != c_out || out.height != spec.out_size(in.height) ||
      out.width != spec.out_size(in.width))
    throw RuntimeError("plan: conv '" + spec.name + "' shapes do not chain");
  const int batch = in.batch, h = in.height, w = in.width;
  Conv2dNhwcSplitK split;
  if (dense) {  // split-K where the rule finds SMs idle; the workspace of the conv's lane (a lane runs in
                // order)
    const Conv2dNhwcOp& op = ops_.conv(spec);
    split.splits = op.split_k(batch, h, w, ops_.conv_split_limit());
    const Conv2dNhwcSplitSizes sizes = op.split_sizes(batch, h, w, split.splits);
    plan_.splitk_floats = std::max(plan_.splitk_floats, sizes.partial_floats);
    plan_.splitk_arrivals = std::max(plan_.splitk_arrivals, sizes.arrivals);
    if (!measuring_ && split.splits > 1) {
      split.partial = plan_.splitk_workspace + size_t(lane_) * plan_.splitk_floats;
      split.arrivals = plan_.splitk_counters.as<unsigned>() + size_t(lane_) * plan_.splitk_arrivals;
    }
  }
  if (measuring_) return;
  const NhwcView src = in.view(), dst = out.view(), res = residual ? residual->view() : NhwcView{};
  if (const Conv2dStemNhwcOp* stem = ops_.stem(spec)) {
    const float* image = float_input_;
    record([stem, batch, h, w, image, dst] { stem->run(batch, h, w, image, dst); });
  } else if (spec.groups == 1) {
    const Conv2dNhwcOp& op = ops_.conv(spec);
    record([&op, batch, h, w, src, dst, res, split] { op.run(batch, h, w, src, dst, res, 0, split); });
  } else {
    const NhwcDepthwise& op = ops_.depthwise(spec);
    record([&op, batch, h, w, src, dst, res] { op.run(batch, h, w, src, dst, res); });
  }
}

void NhwcPlanBuilder::pool(int kernel, const NhwcActivation& in, const NhwcActivation& out) {
  if (measuring_) return;
  const NhwcLayerOps& layers = ops_.layers();
  const int batch = in.batch, h = in.height, w = in.width, c = in.channels;
  const NhwcView src = in.view(), dst = out.view();
  record([&layers, batch, h, w, c, kernel, src, dst] { layers.maxpool(batch, h, w, c, kernel, src, dst); });
}

void NhwcPlanBuilder::attention(const AttentionSpec& a, const NhwcActivation& qkv,
                                const NhwcActivation& merged, const NhwcActivation& v) {
  const PsaDims dims = psa_dims(a, qkv.batch, qkv.height * qkv.width);
  float* lse = plan_.arena.take(size_t(dims.batch_heads()) * dims.n);
  if (measuring_) return;
  auto run = std::make_unique<NhwcAttentionRun>();
  run->name = a.name;
  if (const std::optional<HalfType> half = half_type_of(ops_.type()))
    run->op = std::make_unique<PsaHalfOp>(ops_.backend(), kPsaHalfNetworkVariant, *half, dims);
  else
    run->op = std::make_unique<PsaTf32NhwcOp>(ops_.backend(), ops_.type(), dims);
  run->qkv = qkv;
  run->lse = lse;
  const PsaNhwcForward* op = run->op.get();
  plan_.nhwc_attentions.push_back(std::move(run));
  const NhwcView q = qkv.view(), m = merged.view(), vo = v.view();
  record([op, q, m, vo, lse] { op->forward_nhwc(q.data, q.pitch, m.data, m.pitch, vo.data, vo.pitch, lse); });
}

void NhwcPlanBuilder::upsample(const NhwcActivation& in, const NhwcActivation& out) {
  if (measuring_) return;
  const NhwcLayerOps& layers = ops_.layers();
  const int batch = in.batch, h = in.height, w = in.width, c = in.channels;
  const NhwcView src = in.view(), dst = out.view();
  record([&layers, batch, h, w, c, src, dst] { layers.upsample2x(batch, h, w, c, src, dst); });
}

void NhwcPlanBuilder::copy(const NhwcActivation& in, const NhwcActivation& out) {
  if (measuring_) return;
  const NhwcLayerOps& layers = ops_.layers();
  const int64_t pixels = in.pixels();
  const int c = in.channels;
  const NhwcView src = in.view(), dst = out.view();
  record([&layers, pixels, c, src, dst] { layers.copy(pixels, c, src, dst); });
}

void NhwcPlanBuilder::detect(const DetectSpec& d, const std::vector<NhwcActivation>& levels) {
  int anchors = 0;
  for (const NhwcActivation& l : levels) anchors += l.height * l.width;
  auto [boxes, scores] = head_outputs(anchors, d.nc);
  // A branch's last conv into a padded NHWC tensor, then its real channels into the level's anchor range.
  auto branch = [&](const std::vector<ConvSpec>& convs, const NhwcActivation& in, const Activation& planes,
                    int first) {
    NhwcActivation x = in;
    for (size_t j = 0; j + 1 < convs.size(); ++j) x = conv_new(convs[j], x);
    const ConvSpec& last = convs.back();
    const NhwcActivation padded = alloc(ops_.conv(last).shape().c_out, x.height, x.width);
    conv(last, x, padded, nullptr);
    if (measuring_) return;
    const NhwcLayerOps& layers = ops_.layers();
    const int batch = padded.batch, pixels = padded.height * padded.width, channels = last.c_out;
    const NhwcView src = padded.view();
    float* dst = planes.data;
    record([&layers, batch, pixels, channels, src, dst, anchors, first] {
      layers.to_planes(batch, pixels, channels, src, dst, anchors, first);
    });
  };
  // The box and class branches of every level are independent chains of small convs: one lane each.
  fork_lanes(1 + 2 * int(levels.size()));
  int first = 0;
  for (size_t i = 0; i < levels.size(); ++i) {
    use_lane(1 + 2 * int(i));
    branch(d.levels[i].box, levels[i], boxes, first);
    use_lane(2 + 2 * int(i));
    branch(d.levels[i].cls, levels[i], scores, first);
    first += levels[i].height * levels[i].width;
  }
  join_lanes();
  NhwcOps& ops = ops_;
  const int height = plan_.height, width = plan_.width;
  detect_tail(
      d, [&ops, height, width]() -> const DetectDecodeOp& { return ops.decode(height, width); }, boxes,
      scores);
}

}  // namespace

std::vector<CompileRequest> nhwc_plan_compile_requests(const Yolo26Model& model, ActivationType type) {
  std::vector<CompileRequest> requests;
  for_each_attention(model, [&](const AttentionSpec& a, const LayerSpec&) {
    const std::optional<HalfType> half = half_type_of(type);
    CompileRequest r = half ? psa_half_compile_request(kPsaHalfNetworkVariant, *half, a.key_dim)
                            : psa_tf32_nhwc_compile_request(type, a.key_dim);
    if (std::find(requests.begin(), requests.end(), r) == requests.end()) requests.push_back(std::move(r));
  });
  return requests;
}

std::unique_ptr<ShapePlan> build_nhwc_plan(NhwcOps& ops, const Yolo26Model& model, int batch, int height,
                                           int width) {
  check_input_shape(batch, height, width);
  auto plan = std::make_unique<ShapePlan>();
  plan->batch = batch, plan->height = height, plan->width = width;
  plan->nhwc_type = ops.type();
  NhwcPlanBuilder(ops, *plan).build(model);           // measuring pass: sizes only
  plan->arena.take(plan->splitk_floats * kMaxLanes);  // split-K partials, taken first in the real pass
  plan->arena.allocate(ops.backend());
  plan->steps.clear();
  plan->tensors.clear();
  plan->nhwc_tensors.clear();
  plan->splitk_workspace = plan->arena.take(plan->splitk_floats * kMaxLanes);
  if (plan->splitk_arrivals)
    plan->splitk_counters =
        ops.backend().upload_vector(std::vector<unsigned>(plan->splitk_arrivals * kMaxLanes, 0u));
  NhwcPlanBuilder(ops, *plan).build(model);
  return plan;
}

}  // namespace lab
