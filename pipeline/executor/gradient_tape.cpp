// GradientTape: each op's buffers and kernels' ops made when it is built, its forward launches and its
// backward recorded (conv: one launch writing y = act(z) (+ residual) and, with SiLU, the pre-activation z;
// backward: SiLU backward, input, weight and bias gradients; pool, upsample, slice, concat, anchors: the
// weightless backward kernels; attention: PsaOp::backward on the forward's workspace). Each record notes the
// tensors its backward adds to, which decides the concat gradient aliases at the first backward.
#include "pipeline/executor/gradient_tape.hpp"

#include <algorithm>

#include "kernels/attention/psa_op.hpp"
#include "nvrtc_runtime/errors.hpp"
#include "pipeline/executor/input_grad_conv.hpp"
#include "pipeline/executor/network_ops.hpp"
#include "pipeline/executor/precision_policy.hpp"

namespace lab {

namespace {

// Whether a seed is on t.
bool is_seeded(const std::vector<GradientTape::Seed>& seeds, const TapeTensor& t) {
  return std::any_of(seeds.begin(), seeds.end(),
                     [&t](const GradientTape::Seed& s) { return s.tensor.id == t.id; });
}

// Whether t is exactly one of a concat's (or anchors') parts.
bool appears_once(const std::vector<TapeTensor>& parts, const TapeTensor& t) {
  return std::count_if(parts.begin(), parts.end(), [&t](const TapeTensor& p) { return p.id == t.id; }) == 1;
}

}  // namespace

GradientTape::GradientTape(Backend& backend, Precision precision)
    : backend_(backend),
      precision_(precision),
      kernels_(backend),
      backward_kernels_(backend),
      copy_(kernels_),
      add_(backward_kernels_),
      upsample_(kernels_),
      upsample_backward_(backward_kernels_),
      activation_(backend) {}

GradientTape::~GradientTape() {
  backend_.synchronize();  // nothing in flight reads a buffer about to be freed
}

TapeTensor GradientTape::make(int batch, int channels, int height, int width, bool needs_grad) {
  TapeTensor t{int(nodes_.size()), batch, channels, height, width};
  Node node;
  node.tensor = t;
  node.value = backend_.alloc_array<float>(t.count());
  node.needs_grad = needs_grad;
  nodes_.push_back(std::move(node));
  return t;
}

TapeTensor GradientTape::make_view(const TapeTensor& of, int first, const TapeTensor& shape,
                                   bool needs_grad) {
  TapeTensor t = shape;
  t.id = int(nodes_.size());
  Node node;
  node.tensor = t;
  node.value_of = of.id, node.value_first = first;
  node.needs_grad = needs_grad;
  nodes_.push_back(std::move(node));
  return t;
}

std::pair<int, int> GradientTape::value_root(int id) const {
  int first = 0;
  for (; nodes_[size_t(id)].value_of >= 0; id = nodes_[size_t(id)].value_of)
    first += nodes_[size_t(id)].value_first;
  return {id, first};
}

float* GradientTape::data(const TapeTensor& t) const {
  const Node& node = nodes_[size_t(t.id)];
  if (node.value_of >= 0) throw RuntimeError("gradient tape: a plain pointer to a view's values");
  return node.value.as<float>();
}

PlaneView GradientTape::view(const TapeTensor& t) const {
  const Node& node = nodes_[size_t(t.id)];
  if (node.value_of < 0) return dense_view(node.value.as<float>(), t.channels, t.plane());
  PlaneView v = view(nodes_[size_t(node.value_of)].tensor).channels_from(node.value_first);
  v.data += node.value_pixel;
  return v;
}

TapeTensor GradientTape::dense(const TapeTensor& t) {
  if (nodes_[size_t(t.id)].value_of < 0) {
    nodes_[size_t(t.id)].dense_value = true;
    return t;
  }
  const TapeTensor y = make(t.batch, t.channels, t.height, t.width, needs_grad(t));
  nodes_[size_t(y.id)].dense_value = true;
  record(
      {t}, [this, t, y] { copy_.run(t.batch, t.channels, t.plane(), view(t), view(y)); },
      [this, t, y] {
        if (has_grad(y)) add_grad(t, grad_view(y), 0, t.channels);
      });
  return y;
}

// Concats first: a concat part p whose values are channels [f, f + p.channels) of root r (r itself, or r's
// slice, or its detached twin) is placed with r: r's buffer becomes the concat's channels [c0 - f, c0 - f +
// r.channels) when the concat's parts from r are exactly all of r's channels, each at that same base (C3k2's
// two halves of cv1's output side by side), and nothing reads or writes r's values or any view of them
// through a plain pointer (dense(): the attention, a batch-statistics conv's output and residual, the
// anchors, the input). Every op reads and writes the other tensors through views (PlaneView: any image
// stride, dense planes), so r's producer then writes straight into the concat and the concat's forward skips
// the copy (its part's view is already its destination). A concat's output is a root like any other and may
// in turn be placed in a later concat; r is never placed in a concat whose own buffer lies in r's. Then the
// anchors: a level that is still a root of its own, with no dense-valued view, becomes its anchor range of
// the anchors' buffer (channel stride A), which the detect head's last conv writes as in the inference
// network.
void GradientTape::place_parts() {
  std::vector<char> dense_below(nodes_.size(), 0);  // the roots of every dense-valued node's chain
  for (size_t i = 0; i < nodes_.size(); ++i)
    if (nodes_[i].dense_value)
      for (int id = int(i); id >= 0; id = nodes_[size_t(id)].value_of) dense_below[size_t(id)] = 1;
  struct Group {
    int root, base, channels;
    bool same_base;
  };
  for (const ConcatRecord& c : concats_) {
    std::vector<Group> groups;
    int c0 = 0;
    for (const TapeTensor& p : c.parts) {
      const auto [root, first] = value_root(p.id);
      auto g = std::find_if(groups.begin(), groups.end(),
                            [root = root](const Group& x) { return x.root == root; });
      if (g == groups.end()) g = groups.insert(groups.end(), {root, c0 - first, 0, true});
      g->channels += p.channels;
      g->same_base = g->same_base && g->base == c0 - first;
      c0 += p.channels;
    }
    for (const Group& g : groups) {
      Node& r = nodes_[size_t(g.root)];
      if (!g.same_base || dense_below[size_t(g.root)] || g.channels != r.tensor.channels || g.base < 0 ||
          g.base + r.tensor.channels > c.y.channels || value_root(c.y.id).first == g.root)
        continue;
      r.value_of = c.y.id, r.value_first = g.base;
      r.value = DeviceBuffer{};
    }
  }
  for (const ConcatRecord& a : anchors_) {
    int64_t offset = 0;
    for (const TapeTensor& l : a.parts) {
      Node& level = nodes_[size_t(l.id)];
      if (level.value_of < 0 && !dense_below[size_t(l.id)] && appears_once(a.parts, l)) {
        level.value_of = a.y.id, level.value_pixel = offset;
        level.value = DeviceBuffer{};
      }
      offset += l.plane();
    }
  }
}

PlaneView GradientTape::grad_view(const TapeTensor& t) const {
  const Node& node = nodes_[size_t(t.id)];
  if (node.seed) return dense_view(node.seed, t.channels, t.plane());
  return node.alias_of >= 0 ? node.grad_alias : dense_view(node.grad.as<float>(), t.channels, t.plane());
}

const DeviceBuffer& GradientTape::buffer(const TapeTensor& t) const {
  const Node& node = nodes_[size_t(t.id)];
  if (node.value_of >= 0) throw UsageError("gradient tape: buffer() of a view (a slice, a detached tensor)");
  return node.value;
}

float* GradientTape::scratch(size_t floats) {
  const size_t bytes = std::max<size_t>(1, floats) * sizeof(float);
  std::vector<ScratchBuffer>& pool = running_lane().scratch;
  ScratchBuffer* best = nullptr;  // the smallest free buffer that fits
  for (ScratchBuffer& s : pool)
    if (!s.busy && s.buffer.bytes() >= bytes && (!best || s.buffer.bytes() < best->buffer.bytes())) best = &s;
  if (!best) best = &pool.emplace_back(ScratchBuffer{backend_.alloc(bytes), false});
  best->busy = true;
  return best->buffer.as<float>();
}

void GradientTape::release_scratch() {
  for (ScratchBuffer& s : running_lane().scratch)
    if (!s.held) s.busy = false;  // reused behind the launches of the record that took it (stream order)
}

void GradientTape::begin_branch() {
  if (branch_first_record_ >= 0) throw RuntimeError("gradient tape: a second branch");
  branch_first_record_ = int(forwards_.size());
  branch_first_node_ = int(nodes_.size());
  building_branch_ = true;
}

void GradientTape::end_branch() {
  if (!building_branch_) throw RuntimeError("gradient tape: end_branch without begin_branch");
  branch_end_record_ = int(forwards_.size());
  branch_end_node_ = int(nodes_.size());
  building_branch_ = false;
}

float* GradientTape::zeros(size_t floats) {
  float* b = scratch(floats);
  backend_.fill_bytes(b, 0, std::max<size_t>(1, floats) * sizeof(float));
  return b;
}

std::pair<PlaneView, GradientWrite> GradientTape::grad_target(const TapeTensor& t) {
  Node& node = nodes_[size_t(t.id)];
  const bool fresh = !node.grad_live;
  if (node.alias_of < 0 && !node.grad.get()) node.grad = backend_.alloc_array<float>(t.count());
  node.grad_live = true;
  return {grad_view(t), fresh ? GradientWrite::Overwrite : GradientWrite::Accumulate};
}

void GradientTape::add_grad(const TapeTensor& t, ConstPlaneView src, int first, int channels) {
  if (!needs_grad(t)) return;
  Node& node = nodes_[size_t(t.id)];
  const bool whole = first == 0 && channels == t.channels;
  if (!node.grad_live && !whole) {  // a slice: the rest of the gradient stays zero
    const auto [target, write] = grad_target(t);
    if (node.alias_of < 0)
      backend_.fill_bytes(node.grad.get(), 0, node.grad.bytes());
    else  // a view into another tensor's gradient: only its own channels
      add_.run(t.batch, t.channels, t.plane(),
               dense_view(static_cast<const float*>(zeros(t.count())), t.channels, t.plane()), target, write);
  }
  const auto [target, write] = grad_target(t);
  add_.run(t.batch, channels, t.plane(), src, target.channels_from(first), write);
}

void GradientTape::record(const std::vector<TapeTensor>& reads, std::function<void()> forward,
                          std::function<void()> backward) {
  if (aliases_fixed_) throw UsageError("gradient tape: an op built after the first backward");
  if (values_placed_) throw UsageError("gradient tape: an op built after the first forward");
  for (const TapeTensor& t : reads)
    if (t.id >= 0) {
      if (building_branch_ && t.id < branch_first_node_ && needs_grad(t))
        throw RuntimeError("gradient tape: a branch op adds to the gradient of a tensor outside the branch");
      if (!building_branch_ && in_branch(t.id))
        throw RuntimeError("gradient tape: an op after the branch reads a branch tensor");
      nodes_[size_t(t.id)].last_reader = int(backwards_.size());
      ++nodes_[size_t(t.id)].readers;
    }
  forwards_.push_back(std::move(forward));
  backwards_.push_back(std::move(backward));
}

// Backward runs the records in reverse build order, so a tensor's gradient contributions arrive from its
// consumers latest-built first, the first overwriting. When concat C is the latest-built consumer of its part
// p, C's backward is p's first contribution, and that contribution is C's gradient's slice for p verbatim:
// p's gradient is that slice itself. C's backward then copies nothing for p and marks it live (nothing reads
// p's gradient before C's backward: p's other consumers, built before C, run after it); p's later
// contributions accumulate into the slice, which nobody else reads once C's backward has run. If C gets no
// gradient in a backward, p gets none from C and stays not live: its first contribution overwrites the slice
// of C's dead gradient. Copied as before: a part whose latest consumer is another op, a part twice in C, a
// seed (its contribution comes first), a tensor without a gradient (the input, a detached one), and one whose
// gradient a reader needs dense (grad_view_ok unset: a conv without SiLU or with batch statistics, the
// attention's outputs, a concat's or anchors' output; so the concat's own gradient is always an ordinary
// buffer). If C gets no gradient in a backward while a part aliases it, C's backward zeroes C's gradient and
// marks those parts live (their contributions then add to zeros), so that the views below never read a
// dead gradient.
// Then a tensor x read only by slices, each aliased in one concat at x's base + the slice's first channel
// and together covering x once (C3k2's cv1 output, placed beside its halves in the concat): x's gradient is
// that run of the concat's channels, and the slices' backwards add nothing (x live once they ran: the concat
// wrote the run, and the slices' other consumers added to it before).
// Then, latest-built first, a conv's residual res (y = act(conv(x)) + res): when y's record is res's latest
// reader, res's first contribution is dy verbatim, so res's gradient is y's (nothing reads y's after y's
// record, whose own SiLU backward reads it first); as for a part: not a seed, not the conv's own input (its
// input gradient may accumulate in place), and a strided y gradient only where res's readers take views.
void GradientTape::alias_gradients(const std::vector<Seed>& seeds) {
  for (const ConcatRecord& c : concats_) {
    int c0 = 0;
    for (const TapeTensor& p : c.parts) {
      Node& part = nodes_[size_t(p.id)];
      if (part.grad_view_ok && part.needs_grad && part.last_reader == c.record && appears_once(c.parts, p) &&
          !is_seeded(seeds, p)) {
        Node& concat = nodes_[size_t(c.y.id)];
        if (!concat.grad.get()) concat.grad = backend_.alloc_array<float>(c.y.count());
        part.alias_of = c.y.id;
        part.grad_alias = grad_view(c.y).channels_from(c0);
      }
      c0 += p.channels;
    }
  }
  for (const SliceRecord& sr : slices_) {
    Node& x = nodes_[size_t(sr.x.id)];
    if (x.alias_of >= 0 || !x.needs_grad || !x.grad_view_ok || is_seeded(seeds, sr.x)) continue;
    const PlaneView run = sliced_alias(sr.x);
    if (!run.data) continue;
    x.alias_of = nodes_[size_t(sr.y.id)].alias_of;
    x.grad_alias = run;
  }
  for (size_t i = residuals_.size(); i-- > 0;) {
    const ResidualRecord& r = residuals_[i];
    Node& res = nodes_[size_t(r.res.id)];
    Node& y = nodes_[size_t(r.y.id)];
    if (res.alias_of >= 0 || !res.needs_grad || res.last_reader != r.record || r.res.id == r.x.id ||
        is_seeded(seeds, r.res) || (y.alias_of >= 0 && !res.grad_view_ok))
      continue;
    if (y.alias_of < 0 && !y.grad.get()) y.grad = backend_.alloc_array<float>(r.y.count());
    res.alias_of = r.y.id;
    res.grad_alias = grad_view(r.y);
  }
}

// A SiLU conv's output y (no residual) whose gradient has one contributor, the input gradient of a conv
// reading y itself (run as a conv at stride 1, else conv2d_dgrad): its epilogue multiplies its sums by
// silu'(z) (the gate, z the SiLU conv's pre-activation), so y's gradient buffer holds dz and y's conv skips
// its SiLU backward pass, one read of dy and z and a write of dz a fold (its bias gradient is then summed by
// its weight gradient, on lane 1). Not for a seed (the seed is dy), nor a gradient that is a view of
// another's or that another's views: their buffers hold more than this one contribution.
void GradientTape::fold_silu_backwards(const std::vector<Seed>& seeds) {
  std::vector<char> aliased_into(nodes_.size(), 0);
  for (const Node& n : nodes_)
    if (n.alias_of >= 0) aliased_into[size_t(n.alias_of)] = 1;
  for (Node& y : nodes_)
    y.silu_folded = y.silu_z >= 0 && y.needs_grad && y.readers == 1 && y.last_reader == y.input_grad_reader &&
                    y.alias_of < 0 && !aliased_into[size_t(y.tensor.id)] && !is_seeded(seeds, y.tensor);
}

PlaneView GradientTape::sliced_alias(const TapeTensor& x) const {
  int covered = 0, slices = 0, owner = -1;
  PlaneView run{};
  for (const SliceRecord& sr : slices_) {
    if (sr.x.id != x.id) continue;
    const Node& y = nodes_[size_t(sr.y.id)];
    if (y.alias_of < 0 || (owner >= 0 && y.alias_of != owner)) return {};
    PlaneView at = y.grad_alias;
    at.data -= sr.first * at.channel_stride;  // where x's channel 0 would be
    if (run.data && at.data != run.data) return {};
    run = at, owner = y.alias_of;
    covered += sr.y.channels, ++slices;
  }
  return covered == x.channels && slices == nodes_[size_t(x.id)].readers ? run : PlaneView{};
}

TapeTensor GradientTape::input(int batch, int channels, int height, int width) {
  return dense(make(batch, channels, height, width, false));  // set_input writes it through a plain pointer
}

void GradientTape::set_input(const TapeTensor& t, const std::vector<float>& values) {
  if (values.size() != t.count()) throw UsageError("gradient tape: input of the wrong size");
  backend_.upload(data(t), values.data(), values.size() * sizeof(float));
}

void GradientTape::set_input_pixels(const TapeTensor& t, std::span<const uint8_t> pixels) {
  if (t.channels != 3 || pixels.size() != t.count())
    throw UsageError("gradient tape: input bytes of the wrong size");
  if (input_pixels_.bytes() < pixels.size()) input_pixels_ = backend_.alloc(pixels.size());
  backend_.upload(input_pixels_.get(), pixels.data(), pixels.size());
  set_input_device_pixels(t, input_pixels_.as<const uint8_t>());
}

void GradientTape::set_input_device_pixels(const TapeTensor& t, const uint8_t* device_pixels) {
  if (t.channels != 3) throw UsageError("gradient tape: input bytes for a tensor without 3 channels");
  if (!pixels_to_planes_) pixels_to_planes_ = std::make_unique<PixelInputOp>(backend_);
  pixels_to_planes_->run(device_pixels, data(t), t.batch, t.height, t.width);
}

TapeTensor GradientTape::detach(const TapeTensor& x) {
  return make_view(x, 0, x, false);
}

TapeTensor GradientTape::conv(const ConvSpec& spec, const TapeTensor& x, const TapeTensor* residual) {
  if (x.channels != spec.c_in) throw RuntimeError("gradient tape: conv '" + spec.name + "' input channels");
  const int batch = x.batch, h = x.height, w = x.width;
  TapeConv& c = *convs_.emplace_back(std::make_unique<TapeConv>());
  c.spec = &spec;
  if (spec.batch_statistics) c.bn = make_tape_batchnorm(backend_, spec);
  // The ops run the conv itself (conv.weight, no bias or activation) under batch-statistics BatchNorm.
  const ConvSpec& run = c.bn ? c.bn->unnormalised : spec;
  // The stem is the first conv built (it reads the image); forward and backward at its role's precision.
  const Precision precision =
      conv_precision(convs_.size() == 1 ? ConvRole::Stem : ConvRole::Body, precision_);
  const Conv2dShape shape = conv_shape(run);
  const ConvBackwardVariant variant = choose_conv_backward_variant(shape, precision);
  c.forward = std::make_unique<Conv2dOp>(kernels_, shape, run.weight, run.bias, precision);
  const bool input_grad_as_conv = needs_grad(x) && input_grad_runs_as_conv(shape);
  c.backward = std::make_unique<Conv2dBackwardOp>(
      backend_, shape, run.weight,
      needs_grad(x) && !input_grad_as_conv ? std::optional(choose_conv_input_grad_variant(shape, precision))
                                           : std::nullopt,
      variant);
  if (input_grad_as_conv) {
    c.input_grad = make_input_grad_conv(kernels_, shape, run.weight, precision);
    building_lane().splitk_floats =
        std::max(building_lane().splitk_floats, c.input_grad->splitk_workspace_floats(batch, h, w));
  }
  c.d_weight = backend_.alloc_array<float>(run.weight.size());
  c.d_bias = backend_.alloc_array<float>(run.bias.size());
  backend_.fill_bytes(c.d_weight.get(), 0, c.d_weight.bytes());
  backend_.fill_bytes(c.d_bias.get(), 0, c.d_bias.bytes());
  building_lane().splitk_floats =
      std::max(building_lane().splitk_floats, c.forward->splitk_workspace_floats(batch, h, w));
  if (c.bn) return batchnorm_conv(c, x, residual);

  const TapeTensor y = make(batch, spec.c_out, spec.out_size(h), spec.out_size(w));
  // One launch: y = act(z) (+ residual) and, with SiLU, z = conv(x) + b itself (the pre-activation the SiLU
  // backward needs), both from the conv's epilogue.
  const TapeTensor z = spec.silu ? make(batch, spec.c_out, y.height, y.width, false) : y;
  if (spec.silu) allow_grad_view(y);  // the SiLU backward reads dy strided; without, the GEMMs read it dense
  const TapeConv* conv = &c;
  const TapeTensor res = residual ? *residual : TapeTensor{};
  const bool silu = spec.silu;
  const LaneShared* lane = &building_lane();
  if (residual) residuals_.push_back({int(backwards_.size()), x, y, res});
  if (spec.silu && !residual) nodes_[size_t(y.id)].silu_z = z.id;
  if (needs_grad(x)) nodes_[size_t(x.id)].input_grad_reader = int(backwards_.size());
  record(
      {x, res},
      [this, conv, x, y, z, res, silu, lane] {
        conv->forward->run(x.batch, x.height, x.width, view(x), view(y),
                           res.id >= 0 ? ConstPlaneView(view(res)) : ConstPlaneView{},
                           lane->splitk_workspace.as<float>(), silu ? view(z) : PlaneView{});
      },
      [this, conv, x, y, z, res, silu] {
        if (!has_grad(y)) return;
        const PlaneView dy = grad_view(y);  // dense unless aliased (then with SiLU)
        if (res.id >= 0 && nodes_[size_t(res.id)].alias_of == y.id)
          nodes_[size_t(res.id)].grad_live = true;  // dy is res's gradient, in place
        else if (res.id >= 0)
          add_grad(res, dy, 0, res.channels);
        const float* dz = dy.data;
        // Folded: dy is dz already (its reader's input gradient applied the SiLU backward), and nothing
        // writes it again in this backward.
        const bool folded = nodes_[size_t(y.id)].silu_folded;
        if (silu && !folded) {
          // dz and, in the same pass, the bias gradient (its per-image sums in their own scratch).
          const Conv2dBackwardOp& back = *conv->backward;
          float* dz_silu = scratch(y.count());
          back.silu_backward(y.batch, int(y.plane()), dy.data, dy.batch_stride, data(z), dz_silu,
                             conv->d_bias.as<float>(), scratch(back.bias_grad_workspace_floats(y.batch)));
          dz = dz_silu;
        }
        conv_backward(*conv, x, dz, silu && !folded, silu);
      });
  return y;
}

void GradientTape::conv_backward(const TapeConv& conv, const TapeTensor& x, const float* dz, bool bias_summed,
                                 bool dz_stays) {
  const Conv2dBackwardOp& back = *conv.backward;
  // The weight gradient only reads dz and x's value (which no backward record writes) and writes its own
  // gradients: on lane 1, so its kernels (a 1x1 weight gradient is a few hundred CTAs, less than a wave)
  // share the GPU with the input gradient's and, when nothing writes dz again in this backward (dz_stays: a
  // scratch of this record, or a folded SiLU conv's gradient), with the records after it. Its scratch is then
  // held (at most kMaxHeldScratchBytes of it) until the lanes join.
  // The branch's records (running_branch_) are on a lane of their own already: everything in order there.
  constexpr size_t kMaxHeldScratchBytes = size_t(1) << 30;
  const bool input_grad = needs_grad(x);
  const bool lanes = !running_branch_ && (input_grad || dz_stays);
  if (lanes && dz_stays && held_bytes_ > kMaxHeldScratchBytes) join_weight_lane();
  float* workspace = scratch(back.weight_grad_workspace_floats(x.batch, x.height, x.width));
  if (lanes) {
    backend_.fork_lane(kWeightLane);
    backend_.use_lane(kWeightLane);
    weight_lane_open_ = true;
  }
  back.weight_grad(x.batch, x.height, x.width, view(x), dz, conv.d_weight.as<float>(),
                   bias_summed ? nullptr : conv.d_bias.as<float>(), workspace);
  if (lanes) backend_.use_lane(0);
  if (lanes && dz_stays) {
    for (ScratchBuffer& s : main_lane_.scratch)
      if (s.busy && !s.held && (s.buffer.get() == dz || s.buffer.get() == workspace)) {
        s.held = true;
        held_bytes_ += s.buffer.bytes();
      }
  }
  if (input_grad) input_gradient(conv, x, dz);
  if (lanes && !dz_stays) join_weight_lane();
}

void GradientTape::join_weight_lane() {
  if (!weight_lane_open_) return;
  backend_.join_lane(kWeightLane);
  weight_lane_open_ = false;
  for (ScratchBuffer& s : main_lane_.scratch)
    if (s.held) s.held = s.busy = false;
  held_bytes_ = 0;
}

void GradientTape::input_gradient(const TapeConv& conv, const TapeTensor& x, const float* dz) {
  const Conv2dBackwardOp& back = *conv.backward;
  const auto [dx, write] = grad_target(x);
  // x folded (fold_silu_backwards): x's gradient is its conv's dz, this the one contribution to it.
  const Node& xn = nodes_[size_t(x.id)];
  if (xn.silu_folded && write == GradientWrite::Accumulate)
    throw RuntimeError("gradient tape: a folded SiLU backward's gradient has a second contribution");
  const ConstPlaneView gate =
      xn.silu_folded ? ConstPlaneView(view(nodes_[size_t(xn.silu_z)].tensor)) : ConstPlaneView{};
  if (conv.input_grad) {
    // dx [B, c_in, h, w] = conv(dz) (stride 1: the same plane); a later contribution is the conv's residual,
    // read and written in place by the same thread: dx + conv(dz) in one pass, bit for bit add_planes' sum.
    conv.input_grad->run(x.batch, x.height, x.width, dense_view(dz, conv.spec->c_out, x.plane()), dx,
                         write == GradientWrite::Accumulate ? ConstPlaneView(dx) : ConstPlaneView{},
                         running_lane().splitk_workspace.as<float>(), PlaneView{}, gate);
  } else {
    // Into x's gradient (or its alias, a view) directly: written by the first contribution, a later one
    // added in place by the kernel's epilogue (add_grad's sum without its pass and scratch).
    back.input_grad(x.batch, x.height, x.width, dz, dx, write == GradientWrite::Accumulate, gate);
  }
}

ConvWeightLayout TapeConv::input_grad_weight_layout() const {
  return input_grad ? original_weight_layout(*input_grad) : backward->weight_layout();
}

TapeTensor GradientTape::slice(const TapeTensor& x, int first, int count) {
  if (first < 0 || count < 1 || first + count > x.channels)
    throw RuntimeError("gradient tape: slice out of the tensor's channels");
  const TapeTensor y = make_view(x, first, TapeTensor{-1, x.batch, count, x.height, x.width}, true);
  allow_grad_view(y);
  slices_.push_back({int(backwards_.size()), x, y, first});
  record({x}, nullptr, [this, x, y, first, count] {
    if (!has_grad(y)) return;
    if (grad_aliased(x) && grad_view(x).channels_from(first).data == grad_view(y).data)
      nodes_[size_t(x.id)].grad_live = true;  // y's gradient is x's, in place
    else
      add_grad(x, grad_view(y), first, count);
  });
  return y;
}

TapeTensor GradientTape::concat(const std::vector<TapeTensor>& parts) {
  int channels = 0;
  for (const TapeTensor& p : parts) channels += p.channels;
  const TapeTensor& first = parts.front();
  for (const TapeTensor& p : parts)
    if (p.batch != first.batch || p.height != first.height || p.width != first.width)
      throw RuntimeError("gradient tape: concat of parts with different shapes");
  const TapeTensor y = make(first.batch, channels, first.height, first.width);
  concats_.push_back({int(backwards_.size()), y, parts});
  record(
      parts,
      [this, parts, y] {
        int offset = 0;
        for (const TapeTensor& p : parts) {
          const PlaneView src = view(p), dst = view(y).channels_from(offset);
          if (src.data != dst.data)  // else placed: its producer wrote it there
            copy_.run(p.batch, p.channels, p.plane(), src, dst);
          offset += p.channels;
        }
      },
      [this, parts, y] {
        if (!has_grad(y)) {
          // The aliased parts' gradients start as zeros in the dead gradient (alias_gradients).
          bool aliased = false;
          for (const TapeTensor& p : parts)
            if (nodes_[size_t(p.id)].alias_of == y.id) aliased = nodes_[size_t(p.id)].grad_live = true;
          if (aliased)
            backend_.fill_bytes(nodes_[size_t(y.id)].grad.get(), 0, nodes_[size_t(y.id)].grad.bytes());
          return;
        }
        int c0 = 0;
        for (const TapeTensor& p : parts) {
          Node& part = nodes_[size_t(p.id)];
          if (part.alias_of == y.id)
            part.grad_live = true;  // its gradient is its slice of y's, written
          else
            add_grad(p, grad_view(y).channels_from(c0), 0, p.channels);
          c0 += p.channels;
        }
      });
  return y;
}

TapeTensor GradientTape::maxpool(const TapeTensor& x, int kernel) {
  const TapeTensor y = make(x.batch, x.channels, x.height, x.width);
  auto pool = std::make_shared<MaxPool2dOp>(kernels_, x.channels, kernel);
  auto back = std::make_shared<MaxPool2dBackwardOp>(backward_kernels_, x.channels, kernel);
  allow_grad_view(y);
  record(
      {x}, [this, pool, x, y] { pool->run(x.batch, x.height, x.width, view(x), view(y)); },
      [this, back, x, y] {
        if (!has_grad(y) || !needs_grad(x)) return;
        const auto [target, write] = grad_target(x);
        back->run(x.batch, x.height, x.width, view(x), grad_view(y), target, write);
      });
  return y;
}

TapeTensor GradientTape::upsample(const TapeTensor& x) {
  const TapeTensor y = make(x.batch, x.channels, 2 * x.height, 2 * x.width);
  allow_grad_view(y);
  record(
      {x}, [this, x, y] { upsample_.run(x.batch, x.channels, x.height, x.width, view(x), view(y)); },
      [this, x, y] {
        if (!has_grad(y) || !needs_grad(x)) return;
        const auto [target, write] = grad_target(x);
        upsample_backward_.run(x.batch, x.channels, x.height, x.width, grad_view(y), target, write);
      });
  return y;
}

std::pair<TapeTensor, TapeTensor> GradientTape::attention(const AttentionSpec& spec,
                                                          const TapeTensor& qkv_in) {
  const TapeTensor qkv = dense(qkv_in);  // PsaOp reads and writes plain pointers
  PsaDims dims;
  dims.batch = qkv.batch, dims.num_heads = spec.num_heads, dims.key_dim = spec.key_dim;
  dims.n = int(qkv.plane()), dims.scale = spec.scale;
  auto op = std::make_shared<PsaOp>(backend_, training_attention_variant(precision_, dims.key_dim), dims);
  attentions_.push_back(op);
  auto ws = std::make_shared<PsaWorkspace>(op->workspace());
  const TapeTensor merged = dense(make(qkv.batch, spec.dim, qkv.height, qkv.width));
  const TapeTensor v = dense(make(qkv.batch, spec.dim, qkv.height, qkv.width));
  record(
      {qkv}, [this, op, ws, qkv, merged, v] { op->forward(data(qkv), data(merged), data(v), *ws); },
      [this, op, ws, qkv, merged, v] {
        if ((!has_grad(merged) && !has_grad(v)) || !needs_grad(qkv)) return;
        // A missing gradient is zero: the backward reads both.
        const float* d_merged = has_grad(merged) ? grad_view(merged).data : zeros(merged.count());
        const float* d_v = has_grad(v) ? grad_view(v).data : zeros(v.count());
        float* d_qkv = scratch(qkv.count());
        op->backward(d_merged, d_v, d_qkv, *ws);
        add_grad(qkv, dense_view(static_cast<const float*>(d_qkv), qkv.channels, qkv.plane()), 0,
                 qkv.channels);
      });
  return {merged, v};
}

TapeTensor GradientTape::anchors(const std::vector<TapeTensor>& levels) {
  int64_t total = 0;
  for (const TapeTensor& l : levels) total += l.plane();
  const TapeTensor& first = levels.front();
  for (const TapeTensor& l : levels)
    if (l.batch != first.batch || l.channels != first.channels)
      throw RuntimeError("gradient tape: anchors of levels with different batches or channels");
  const TapeTensor y = dense(make(first.batch, first.channels, 1, int(total)));  // the loss reads buffer(y)
  // Level i's anchors of y: a [B, C, h_i w_i] view at anchor `offset` with channel stride A.
  const auto range = [total](float* base, int channels, int64_t offset) {
    return PlaneView{base + offset, channels * total, total};
  };
  anchors_.push_back({int(backwards_.size()), y, levels});
  record(
      levels,
      [this, levels, y, range] {
        int64_t offset = 0;
        for (const TapeTensor& l : levels) {
          const PlaneView src = view(l), dst = range(data(y), y.channels, offset);
          if (src.data != dst.data)  // else placed: its conv wrote it there
            copy_.run(l.batch, l.channels, l.plane(), src, dst);
          offset += l.plane();
        }
      },
      [this, levels, y, range] {
        if (!has_grad(y)) return;
        int64_t offset = 0;
        for (const TapeTensor& l : levels) {
          add_grad(l, range(grad_view(y).data, y.channels, offset), 0, l.channels);
          offset += l.plane();
        }
      });
  return y;
}

void GradientTape::run_or_replay(std::unique_ptr<LaunchGraph>& graph, int& runs,
                                 const std::function<void()>& work) {
  if (!graph && runs > 0 && backend_.can_capture_graphs() && graph_error_.empty() && !sync_) {
    try {
      graph = backend_.capture(work);
    } catch (const std::exception& e) {
      graph_error_ = e.what();
    }
  }
  ++runs;
  if (graph)
    graph->replay();
  else
    work();
}

void GradientTape::forward() {
  for (LaneShared* lane : {&main_lane_, &branch_lane_})
    if (lane->splitk_workspace.bytes() < lane->splitk_floats * sizeof(float))
      lane->splitk_workspace = backend_.alloc_array<float>(lane->splitk_floats);
  if (!values_placed_) place_parts();
  values_placed_ = true;
  run_or_replay(forward_graph_, forward_runs_, [this] {
    const bool lanes = branch_on_lane();
    for (size_t i = 0; i < forwards_.size(); ++i) {
      if (lanes && int(i) == branch_first_record_) {  // after the ops it reads, beside the ops after it
        backend_.fork_lane(kBranchLane);
        backend_.use_lane(kBranchLane);
      }
      if (lanes && int(i) == branch_end_record_) backend_.use_lane(0);
      if (forwards_[i]) forwards_[i]();  // a slice has no forward
    }
    if (lanes) backend_.join_lane(kBranchLane);
  });
}

void GradientTape::backward(const std::vector<Seed>& seeds) {
  for (const Seed& s : seeds)
    if (s.grad->bytes() < s.tensor.count() * sizeof(float))
      throw RuntimeError("gradient tape: seed smaller than its tensor");
  if (!aliases_fixed_) {
    alias_gradients(seeds);
    fold_silu_backwards(seeds);
  }
  aliases_fixed_ = true;
  for (const Seed& s : seeds)
    if (grad_aliased(s.tensor))
      throw UsageError(
          "gradient tape: a seed on a tensor whose gradient is a slice of a concat's (fixed by "
          "the first backward's seeds)");
  std::vector<const void*> seed_buffers;
  for (const Seed& s : seeds) seed_buffers.push_back(s.grad->get());
  if (seed_buffers != graph_seeds_)
    backward_graph_.reset();  // a graph reads the buffers it was captured with
  graph_seeds_ = seed_buffers;
  run_or_replay(backward_graph_, backward_runs_, [this, seeds] {
    for (Node& node : nodes_) node.grad_live = false, node.seed = nullptr;
    const auto seed = [this](const Seed& s) {
      Node& node = nodes_[size_t(s.tensor.id)];
      if (node.readers == 0 && node.alias_of < 0 && !node.grad_live) {  // nothing else writes it: in place
        node.seed = s.grad->as<float>();
        node.grad_live = true;
        return;
      }
      add_grad(s.tensor, dense_view(s.grad->as<const float>(), s.tensor.channels, s.tensor.plane()), 0,
               s.tensor.channels);
    };
    const bool lanes = branch_on_lane();
    const auto in_branch_record = [this, lanes](size_t i) {
      return lanes && int(i) >= branch_first_record_ && int(i) < branch_end_record_;
    };
    if (lanes) {  // the branch first, on its lane, from its seeds: nothing outside it adds to its gradients
      backend_.fork_lane(kBranchLane);
      backend_.use_lane(kBranchLane);
      running_branch_ = true;
      for (const Seed& s : seeds)
        if (in_branch(s.tensor.id)) seed(s);
      for (size_t i = size_t(branch_end_record_); i-- > size_t(branch_first_record_);) {
        backwards_[i]();
        release_scratch();
      }
      running_branch_ = false;
      backend_.use_lane(0);
    }
    for (const Seed& s : seeds)
      if (!lanes || !in_branch(s.tensor.id)) seed(s);
    for (size_t i = backwards_.size(); i-- > 0;) {
      if (in_branch_record(i)) continue;
      backwards_[i]();
      release_scratch();
    }
    join_weight_lane();
    if (lanes) {
      backend_.join_lane(kBranchLane);
      for (ScratchBuffer& s : branch_lane_.scratch) s.busy = false;
    }
  });
}

reference::ConvGradients GradientTape::conv_gradients() const {
  reference::ConvGradients out;
  for (const auto& c : convs_) {
    reference::ConvGradient& g = out[c->spec->name];
    const std::vector<float> w = backend_.download_vector<float>(c->d_weight, c->spec->weight.size());
    const std::vector<float> b = backend_.download_vector<float>(c->d_bias, c->spec->bias.size());
    g.weight.assign(w.begin(), w.end());
    g.bias.assign(b.begin(), b.end());
    if (c->bn) {
      const size_t channels = size_t(c->spec->c_out);
      const std::vector<float> gamma = backend_.download_vector<float>(c->bn->d_gamma, channels);
      const std::vector<float> beta = backend_.download_vector<float>(c->bn->d_beta, channels);
      g.gamma.assign(gamma.begin(), gamma.end());
      g.beta.assign(beta.begin(), beta.end());
    }
  }
  return out;
}

}  // namespace lab
