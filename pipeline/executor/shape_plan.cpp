// build_shape_plan: places the activations of every layer (concatenation inputs
// written straight into their channel slice, channel splits read in place, the
// head writing into its anchor range) and records the launches of each module
// as spec/yolo26.md defines it.
#include "pipeline/executor/shape_plan.hpp"

#include <algorithm>

#include "nvrtc_runtime/errors.hpp"
#include "pipeline/executor/model_walk.hpp"
#include "pipeline/executor/plan_walk.hpp"

namespace lab {
namespace {

// A one-launch fused forward on small problems (yolo26n at 640, batch 1: `fused` 17.8 vs `tiled` 35.3 us on
// an H200, `fused_tc_w16` 16.2 vs `fused` 17.9); on large maps or batches each of its CTAs reading every key
// of its head costs more than the launches it saves (`fused` at batch 32: 215 vs 176 us; 80x80: level).
// docs/PERFORMANCE.md.
std::string psa_variant(const PsaDims& dims) {
  const bool fused = psa_fused_problem(dims.key_dim).empty() && dims.n <= kPsaFusedMaxTokens &&
                     int64_t(dims.batch_heads()) * dims.n <= kPsaFusedMaxRows;
  return fused ? "fused_tc_w16" : "tiled";
}

class PlanBuilder : public PlanWalk<PlanBuilder, Activation> {
 public:
  PlanBuilder(NetworkOps& ops, ShapePlan& plan) : PlanWalk(ops.backend(), plan), ops_(ops) {}

  void build(const Yolo26Model& model) {
    Activation input = alloc(3, plan_.height, plan_.width);
    plan_.tensors["input"] = input;
    walk(model, input);
  }

  // The primitives PlanWalk walks the modules with.
  Activation alloc(int channels, int height, int width) {
    return plan_.arena.take_activation(plan_.batch, channels, height, width);
  }
  void name_tensor(const std::string& name, const Activation& a) { plan_.tensors[name] = a; }
  // out = act(conv(in) + b) (+ residual)
  void conv(const ConvSpec& spec, const Activation& in, const Activation& out, const Activation* residual);
  void pool(int kernel, const Activation& in, const Activation& out);
  void attention(const AttentionSpec& a, const Activation& qkv, const Activation& merged,
                 const Activation& v);
  void upsample(const Activation& in, const Activation& out);
  void copy(const Activation& in, const Activation& out);
  void detect(const DetectSpec& d, const std::vector<Activation>& levels);

 private:
  NetworkOps& ops_;
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

void PlanBuilder::pool(int kernel, const Activation& in, const Activation& out) {
  if (measuring_) return;
  const MaxPool2dOp& op = ops_.pool(in.channels, kernel);
  const ConstPlaneView src = in.cview();
  const PlaneView dst = out.view();
  const int batch = in.batch, h = in.height, w = in.width;
  record([&op, batch, h, w, src, dst] { op.run(batch, h, w, src, dst); });
}

void PlanBuilder::attention(const AttentionSpec& a, const Activation& qkv, const Activation& merged,
                            const Activation& v) {
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
  int anchors = 0;
  for (const Activation& l : levels) anchors += int(l.plane());
  auto [boxes, scores] = head_outputs(anchors, d.nc);
  int first = 0;
  // The box and class branches of every level are independent chains of small convs: one lane each.
  fork_lanes(1 + 2 * int(levels.size()));
  for (size_t i = 0; i < levels.size(); ++i) {
    const DetectLevelSpec& level = d.levels[i];
    const Activation& in = levels[i];
    // The level's anchor range of [B, 4, A] / [B, nc, A], seen as a [B, C, h, w] view with channel stride A.
    auto range = [&](const Activation& head) {
      Activation v = head;
      v.data = head.data + first;
      v.height = in.height, v.width = in.width;
      return v;
    };
    use_lane(1 + 2 * int(i));
    Activation x = in;
    for (size_t j = 0; j + 1 < level.box.size(); ++j) x = conv_new(level.box[j], x);
    conv(level.box.back(), x, range(boxes), nullptr);
    use_lane(2 + 2 * int(i));
    x = in;
    for (size_t j = 0; j + 1 < level.cls.size(); ++j) x = conv_new(level.cls[j], x);
    conv(level.cls.back(), x, range(scores), nullptr);
    first += int(in.plane());
  }
  join_lanes();
  NetworkOps& ops = ops_;
  const int height = plan_.height, width = plan_.width;
  detect_tail(d, [&ops, height, width]() -> const DetectDecodeOp& { return ops.decode(height, width); }, boxes,
              scores);
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
  for_each_attention(model, add);
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
