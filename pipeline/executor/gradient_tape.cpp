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
  node.value = std::make_shared<DeviceBuffer>(backend_.alloc_array<float>(t.count()));
  node.needs_grad = needs_grad;
  nodes_.push_back(std::move(node));
  return t;
}

float* GradientTape::data(const TapeTensor& t) const {
  return nodes_[size_t(t.id)].value->as<float>();
}

PlaneView GradientTape::view(const TapeTensor& t) const {
  return dense_view(data(t), t.channels, t.plane());
}

PlaneView GradientTape::grad_view(const TapeTensor& t) const {
  const Node& node = nodes_[size_t(t.id)];
  return node.alias_of >= 0 ? node.grad_alias : dense_view(node.grad.as<float>(), t.channels, t.plane());
}

const DeviceBuffer& GradientTape::buffer(const TapeTensor& t) const {
  return *nodes_[size_t(t.id)].value;
}

float* GradientTape::scratch(size_t floats) {
  const size_t bytes = std::max<size_t>(1, floats) * sizeof(float);
  ScratchBuffer* best = nullptr;  // the smallest free buffer that fits
  for (ScratchBuffer& s : scratch_)
    if (!s.busy && s.buffer.bytes() >= bytes && (!best || s.buffer.bytes() < best->buffer.bytes())) best = &s;
  if (!best) best = &scratch_.emplace_back(ScratchBuffer{backend_.alloc(bytes), false});
  best->busy = true;
  return best->buffer.as<float>();
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
    // An aliased gradient not live yet: its concat got no gradient in this backward, and nothing reads the
    // concat's any more (its backward ran before any other contribution to t): zero all of it.
    if (node.alias_of < 0 && !node.grad.get()) node.grad = backend_.alloc_array<float>(t.count());
    DeviceBuffer& zeroed = node.alias_of < 0 ? node.grad : nodes_[size_t(node.alias_of)].grad;
    backend_.fill_bytes(zeroed.get(), 0, zeroed.bytes());
    node.grad_live = true;
  }
  const auto [target, write] = grad_target(t);
  add_.run(t.batch, channels, t.plane(), src, target.channels_from(first), write);
}

void GradientTape::record(const std::vector<TapeTensor>& reads, std::function<void()> forward,
                          std::function<void()> backward) {
  if (aliases_fixed_) throw UsageError("gradient tape: an op built after the first backward");
  for (const TapeTensor& t : reads)
    if (t.id >= 0) nodes_[size_t(t.id)].last_reader = int(backwards_.size());
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
// buffer).
void GradientTape::alias_concat_gradients(const std::vector<Seed>& seeds) {
  for (const ConcatRecord& c : concats_) {
    int c0 = 0;
    for (const TapeTensor& p : c.parts) {
      Node& part = nodes_[size_t(p.id)];
      const bool once = std::count_if(c.parts.begin(), c.parts.end(),
                                      [&p](const TapeTensor& t) { return t.id == p.id; }) == 1;
      const bool seed =
          std::any_of(seeds.begin(), seeds.end(), [&p](const Seed& s) { return s.tensor.id == p.id; });
      if (part.grad_view_ok && part.needs_grad && part.last_reader == c.record && once && !seed) {
        Node& concat = nodes_[size_t(c.y.id)];
        if (!concat.grad.get()) concat.grad = backend_.alloc_array<float>(c.y.count());
        part.alias_of = c.y.id;
        part.grad_alias = grad_view(c.y).channels_from(c0);
      }
      c0 += p.channels;
    }
  }
}

TapeTensor GradientTape::input(int batch, int channels, int height, int width) {
  return make(batch, channels, height, width, false);
}

void GradientTape::set_input(const TapeTensor& t, const std::vector<float>& values) {
  if (values.size() != t.count()) throw UsageError("gradient tape: input of the wrong size");
  backend_.upload(data(t), values.data(), values.size() * sizeof(float));
}

void GradientTape::set_input_pixels(const TapeTensor& t, std::span<const uint8_t> pixels) {
  if (t.channels != 3 || pixels.size() != t.count()) throw UsageError("gradient tape: input bytes of the wrong size");
  if (!pixels_to_planes_) pixels_to_planes_ = std::make_unique<PixelInputOp>(backend_);
  if (input_pixels_.bytes() < pixels.size()) input_pixels_ = backend_.alloc(pixels.size());
  backend_.upload(input_pixels_.get(), pixels.data(), pixels.size());
  pixels_to_planes_->run(input_pixels_.as<const unsigned char>(), data(t), t.batch, t.height, t.width);
}

TapeTensor GradientTape::detach(const TapeTensor& x) {
  TapeTensor t = x;
  t.id = int(nodes_.size());
  Node node;
  node.value = nodes_[size_t(x.id)].value;
  node.needs_grad = false;
  nodes_.push_back(std::move(node));
  return t;
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
      backend_, shape, run.weight, needs_grad(x) && !input_grad_as_conv ? std::optional(variant) : std::nullopt,
      variant);
  if (input_grad_as_conv) {
    c.input_grad = make_input_grad_conv(kernels_, shape, run.weight, precision);
    splitk_floats_ = std::max(splitk_floats_, c.input_grad->splitk_workspace_floats(batch, h, w));
  }
  c.d_weight = backend_.alloc_array<float>(run.weight.size());
  c.d_bias = backend_.alloc_array<float>(run.bias.size());
  backend_.fill_bytes(c.d_weight.get(), 0, c.d_weight.bytes());
  backend_.fill_bytes(c.d_bias.get(), 0, c.d_bias.bytes());
  splitk_floats_ = std::max(splitk_floats_, c.forward->splitk_workspace_floats(batch, h, w));
  if (c.bn) return batchnorm_conv(c, x, residual);

  const TapeTensor y = make(batch, spec.c_out, spec.out_size(h), spec.out_size(w));
  // One launch: y = act(z) (+ residual) and, with SiLU, z = conv(x) + b itself (the pre-activation the SiLU
  // backward needs), both from the conv's epilogue.
  const TapeTensor z = spec.silu ? make(batch, spec.c_out, y.height, y.width, false) : y;
  if (spec.silu) allow_grad_view(y);  // the SiLU backward reads dy strided; without, the GEMMs read it dense
  const TapeConv* conv = &c;
  const TapeTensor res = residual ? *residual : TapeTensor{};
  const bool silu = spec.silu;
  record(
      {x, res},
      [this, conv, x, y, z, res, silu] {
        conv->forward->run(x.batch, x.height, x.width, view(x), view(y),
                           res.id >= 0 ? ConstPlaneView(view(res)) : ConstPlaneView{},
                           splitk_workspace_.as<float>(), silu ? view(z) : PlaneView{});
      },
      [this, conv, x, y, z, res, silu] {
        if (!has_grad(y)) return;
        const PlaneView dy = grad_view(y);  // dense unless aliased (then with SiLU)
        if (res.id >= 0) add_grad(res, dy, 0, res.channels);
        const float* dz = dy.data;
        if (silu) {
          // dz and, in the same pass, the bias gradient (its per-image sums in their own scratch).
          const Conv2dBackwardOp& back = *conv->backward;
          float* dz_silu = scratch(y.count());
          back.silu_backward(y.batch, int(y.plane()), dy.data, dy.batch_stride, data(z), dz_silu,
                             conv->d_bias.as<float>(), scratch(back.bias_grad_workspace_floats(y.batch)));
          dz = dz_silu;
        }
        conv_backward(*conv, x, dz, silu);
      });
  return y;
}

void GradientTape::conv_backward(const TapeConv& conv, const TapeTensor& x, const float* dz,
                                 bool bias_summed) {
  const Conv2dBackwardOp& back = *conv.backward;
  float* workspace = scratch(back.weight_grad_workspace_floats(x.batch, x.height, x.width));
  back.weight_grad(x.batch, x.height, x.width, view(x), dz, conv.d_weight.as<float>(),
                   bias_summed ? nullptr : conv.d_bias.as<float>(), workspace);
  if (!needs_grad(x)) return;
  if (conv.input_grad) {
    // dx [B, c_in, h, w] = conv(dz) (stride 1: the same plane); a later contribution is the conv's residual,
    // read and written in place by the same thread: dx + conv(dz) in one pass, bit for bit add_planes' sum.
    const auto [dx, write] = grad_target(x);
    conv.input_grad->run(x.batch, x.height, x.width, dense_view(dz, conv.spec->c_out, x.plane()), dx,
                         write == GradientWrite::Accumulate ? ConstPlaneView(dx) : ConstPlaneView{},
                         splitk_workspace_.as<float>());
  } else if (!has_grad(x) && !grad_aliased(x)) {  // dense: an aliased gradient goes through add_grad
    back.input_grad(x.batch, x.height, x.width, dz, grad_target(x).first.data);
  } else {
    float* dx = scratch(x.count());
    back.input_grad(x.batch, x.height, x.width, dz, dx);
    add_grad(x, dense_view(static_cast<const float*>(dx), x.channels, x.plane()), 0, x.channels);
  }
}

ConvWeightLayout TapeConv::input_grad_weight_layout() const {
  return input_grad ? original_weight_layout(*input_grad) : backward->weight_layout();
}

TapeTensor GradientTape::slice(const TapeTensor& x, int first, int count) {
  if (first < 0 || count < 1 || first + count > x.channels)
    throw RuntimeError("gradient tape: slice out of the tensor's channels");
  const TapeTensor y = make(x.batch, count, x.height, x.width);
  allow_grad_view(y);
  record(
      {x},
      [this, x, y, first, count] {
        copy_.run(x.batch, count, x.plane(), view(x).channels_from(first), view(y));
      },
      [this, x, y, first, count] {
        if (has_grad(y)) add_grad(x, grad_view(y), first, count);
      });
  return y;
}

TapeTensor GradientTape::concat(const std::vector<TapeTensor>& parts) {
  int channels = 0;
  for (const TapeTensor& p : parts) channels += p.channels;
  const TapeTensor& first = parts.front();
  const TapeTensor y = make(first.batch, channels, first.height, first.width);
  concats_.push_back({int(backwards_.size()), y, parts});
  record(
      parts,
      [this, parts, y] {
        int offset = 0;
        for (const TapeTensor& p : parts) {
          copy_.run(p.batch, p.channels, p.plane(), view(p), view(y).channels_from(offset));
          offset += p.channels;
        }
      },
      [this, parts, y] {
        if (!has_grad(y)) return;
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

std::pair<TapeTensor, TapeTensor> GradientTape::attention(const AttentionSpec& spec, const TapeTensor& qkv) {
  PsaDims dims;
  dims.batch = qkv.batch, dims.num_heads = spec.num_heads, dims.key_dim = spec.key_dim;
  dims.n = int(qkv.plane()), dims.scale = spec.scale;
  auto op = std::make_shared<PsaOp>(backend_, "tiled", dims);
  auto ws = std::make_shared<PsaWorkspace>(op->workspace());
  const TapeTensor merged = make(qkv.batch, spec.dim, qkv.height, qkv.width);
  const TapeTensor v = make(qkv.batch, spec.dim, qkv.height, qkv.width);
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
  const TapeTensor y = make(first.batch, first.channels, 1, int(total));
  // Level i's anchors of y: a [B, C, h_i w_i] view at anchor `offset` with channel stride A.
  const auto range = [total](float* base, int channels, int64_t offset) {
    return PlaneView{base + offset, channels * total, total};
  };
  record(
      levels,
      [this, levels, y, range] {
        int64_t offset = 0;
        for (const TapeTensor& l : levels) {
          copy_.run(l.batch, l.channels, l.plane(), view(l), range(data(y), y.channels, offset));
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
  if (splitk_workspace_.bytes() < splitk_floats_ * sizeof(float))
    splitk_workspace_ = backend_.alloc_array<float>(splitk_floats_);
  run_or_replay(forward_graph_, forward_runs_, [this] {
    for (const auto& f : forwards_) f();
  });
}

void GradientTape::backward(const std::vector<Seed>& seeds) {
  for (const Seed& s : seeds)
    if (s.grad->bytes() < s.tensor.count() * sizeof(float))
      throw RuntimeError("gradient tape: seed smaller than its tensor");
  if (!aliases_fixed_) alias_concat_gradients(seeds);
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
    for (Node& node : nodes_) node.grad_live = false;
    for (const Seed& s : seeds)
      add_grad(s.tensor, dense_view(s.grad->as<const float>(), s.tensor.channels, s.tensor.plane()), 0,
               s.tensor.channels);
    for (size_t i = backwards_.size(); i-- > 0;) {
      backwards_[i]();
      for (ScratchBuffer& s : scratch_) s.busy = false;  // reused behind this record's launches
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
