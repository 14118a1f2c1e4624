// GradientTape: each op's forward launches and its recorded backward (conv: SiLU backward, input, weight and
// bias gradients; pool, upsample, slice, concat, anchors: the weightless backward kernels; attention:
// PsaOp::backward on the forward's workspace).
#include "pipeline/executor/gradient_tape.hpp"

#include <algorithm>

#include "kernels/attention/psa_op.hpp"
#include "pipeline/executor/network_ops.hpp"
#include "nvrtc_runtime/errors.hpp"

namespace lab {

GradientTape::GradientTape(Backend& backend)
    : backend_(backend),
      kernels_(backend),
      backward_kernels_(backend),
      copy_(kernels_),
      add_(backward_kernels_),
      upsample_(kernels_),
      upsample_backward_(backward_kernels_) {}

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
  return dense_view(nodes_[size_t(t.id)].grad.as<float>(), t.channels, t.plane());
}

const DeviceBuffer& GradientTape::buffer(const TapeTensor& t) const {
  return *nodes_[size_t(t.id)].value;
}

DeviceBuffer& GradientTape::scratch(size_t floats) {
  return scratch_.emplace_back(backend_.alloc_array<float>(std::max<size_t>(1, floats)));
}

DeviceBuffer& GradientTape::zeros(size_t floats) {
  DeviceBuffer& b = scratch(floats);
  backend_.fill_bytes(b.get(), 0, b.bytes());
  return b;
}

std::pair<PlaneView, GradientWrite> GradientTape::grad_target(const TapeTensor& t) {
  Node& node = nodes_[size_t(t.id)];
  const bool fresh = !node.grad.get();
  if (fresh) node.grad = backend_.alloc_array<float>(t.count());
  return {grad_view(t), fresh ? GradientWrite::Overwrite : GradientWrite::Accumulate};
}

void GradientTape::add_grad(const TapeTensor& t, ConstPlaneView src, int first, int channels) {
  if (!needs_grad(t)) return;
  Node& node = nodes_[size_t(t.id)];
  const bool whole = first == 0 && channels == t.channels;
  if (!node.grad.get() && !whole) {  // a slice: the rest of the gradient stays zero
    node.grad = backend_.alloc_array<float>(t.count());
    backend_.fill_bytes(node.grad.get(), 0, node.grad.bytes());
  }
  const auto [target, write] = grad_target(t);
  add_.run(t.batch, channels, t.plane(), src, target.channels_from(first), write);
}

TapeTensor GradientTape::constant(const std::vector<float>& values, int batch, int channels, int height,
                                  int width) {
  TapeTensor t = make(batch, channels, height, width, false);
  if (values.size() != t.count()) throw UsageError("gradient tape: constant of the wrong size");
  backend_.upload(data(t), values.data(), values.size() * sizeof(float));
  return t;
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
  const TapeTensor y = make(batch, spec.c_out, spec.out_size(h), spec.out_size(w));
  // z = conv(x) + b, the pre-activation the SiLU backward needs; y = act(z) (+ residual).
  const bool separate_z = spec.silu || residual;
  const TapeTensor z = separate_z ? make(batch, spec.c_out, y.height, y.width, false) : y;
  const Conv2dShape shape = conv_shape(spec);
  Conv2dShape linear = shape;
  linear.silu = false;
  const auto& pre = convs_.emplace_back(std::make_unique<Conv2dOp>(kernels_, linear, spec.weight, spec.bias));
  pre->run(batch, h, w, view(x), view(z));
  if (separate_z) {
    const auto& op = convs_.emplace_back(std::make_unique<Conv2dOp>(kernels_, shape, spec.weight, spec.bias));
    op->run(batch, h, w, view(x), view(y), residual ? ConstPlaneView(view(*residual)) : ConstPlaneView{});
  }

  const ConvBackwardVariant variant = choose_conv_backward_variant(shape);
  const Conv2dBackwardOp* back =
      conv_backwards_
          .emplace_back(std::make_unique<Conv2dBackwardOp>(
              backend_, shape, spec.weight, needs_grad(x) ? std::optional(variant) : std::nullopt, variant))
          .get();
  conv_sizes_[spec.name] = {spec.weight.size(), spec.bias.size()};
  const std::string name = spec.name;
  const bool silu = spec.silu;
  const TapeTensor res = residual ? *residual : TapeTensor{};
  record([this, back, name, silu, x, y, z, res] {
    if (!has_grad(y)) return;
    const float* dy = grad_view(y).data;
    if (res.id >= 0) add_grad(res, grad_view(y), 0, res.channels);
    const float* dz = dy;
    if (silu) {
      float* dz_silu = scratch(y.count()).as<float>();
      back->silu_backward((long long)y.count(), dy, data(z), dz_silu);
      dz = dz_silu;
    }
    ConvParameterGrads& g = conv_grads_[name];
    if (!g.weight.get()) {
      g.weight = backend_.alloc_array<float>(conv_sizes_.at(name).first);
      g.bias = backend_.alloc_array<float>(conv_sizes_.at(name).second);
    }
    float* workspace = scratch(back->weight_grad_workspace_floats(x.batch, x.height, x.width)).as<float>();
    back->weight_grad(x.batch, x.height, x.width, data(x), dz, g.weight.as<float>(), g.bias.as<float>(),
                      workspace);
    if (!needs_grad(x)) return;
    if (!has_grad(x)) {
      const auto [target, write] = grad_target(x);
      back->input_grad(x.batch, x.height, x.width, dz, target.data);
    } else {
      float* dx = scratch(x.count()).as<float>();
      back->input_grad(x.batch, x.height, x.width, dz, dx);
      add_grad(x, dense_view(static_cast<const float*>(dx), x.channels, x.plane()), 0, x.channels);
    }
  });
  return y;
}

TapeTensor GradientTape::slice(const TapeTensor& x, int first, int count) {
  if (first < 0 || count < 1 || first + count > x.channels)
    throw RuntimeError("gradient tape: slice out of the tensor's channels");
  const TapeTensor y = make(x.batch, count, x.height, x.width);
  copy_.run(x.batch, count, x.plane(), view(x).channels_from(first), view(y));
  record([this, x, y, first, count] {
    if (has_grad(y)) add_grad(x, grad_view(y), first, count);
  });
  return y;
}

TapeTensor GradientTape::concat(const std::vector<TapeTensor>& parts) {
  int channels = 0;
  for (const TapeTensor& p : parts) channels += p.channels;
  const TapeTensor& first = parts.front();
  const TapeTensor y = make(first.batch, channels, first.height, first.width);
  int offset = 0;
  for (const TapeTensor& p : parts) {
    copy_.run(p.batch, p.channels, p.plane(), view(p), view(y).channels_from(offset));
    offset += p.channels;
  }
  record([this, parts, y] {
    if (!has_grad(y)) return;
    int c0 = 0;
    for (const TapeTensor& p : parts) {
      add_grad(p, grad_view(y).channels_from(c0), 0, p.channels);
      c0 += p.channels;
    }
  });
  return y;
}

TapeTensor GradientTape::maxpool(const TapeTensor& x, int kernel) {
  const TapeTensor y = make(x.batch, x.channels, x.height, x.width);
  MaxPool2dOp(kernels_, x.channels, kernel).run(x.batch, x.height, x.width, view(x), view(y));
  auto back = std::make_shared<MaxPool2dBackwardOp>(backward_kernels_, x.channels, kernel);
  record([this, back, x, y] {
    if (!has_grad(y) || !needs_grad(x)) return;
    const auto [target, write] = grad_target(x);
    back->run(x.batch, x.height, x.width, view(x), grad_view(y), target, write);
  });
  return y;
}

TapeTensor GradientTape::upsample(const TapeTensor& x) {
  const TapeTensor y = make(x.batch, x.channels, 2 * x.height, 2 * x.width);
  upsample_.run(x.batch, x.channels, x.height, x.width, view(x), view(y));
  record([this, x, y] {
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
  op->forward(data(qkv), data(merged), data(v), *ws);
  record([this, op, ws, qkv, merged, v] {
    if ((!has_grad(merged) && !has_grad(v)) || !needs_grad(qkv)) return;
    // A missing gradient is zero: the backward reads both.
    const float* d_merged =
        has_grad(merged) ? grad_view(merged).data : zeros(merged.count()).as<const float>();
    const float* d_v = has_grad(v) ? grad_view(v).data : zeros(v.count()).as<const float>();
    float* d_qkv = scratch(qkv.count()).as<float>();
    op->backward(d_merged, d_v, d_qkv, *ws);
    add_grad(qkv, dense_view(static_cast<const float*>(d_qkv), qkv.channels, qkv.plane()), 0, qkv.channels);
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
  int64_t offset = 0;
  for (const TapeTensor& l : levels) {
    copy_.run(l.batch, l.channels, l.plane(), view(l), range(data(y), y.channels, offset));
    offset += l.plane();
  }
  record([this, levels, y, range] {
    if (!has_grad(y)) return;
    int64_t offset = 0;
    for (const TapeTensor& l : levels) {
      add_grad(l, range(grad_view(y).data, y.channels, offset), 0, l.channels);
      offset += l.plane();
    }
  });
  return y;
}

void GradientTape::seed(const TapeTensor& t, const DeviceBuffer& grad) {
  if (grad.bytes() < t.count() * sizeof(float))
    throw RuntimeError("gradient tape: seed smaller than its tensor");
  add_grad(t, dense_view(grad.as<const float>(), t.channels, t.plane()), 0, t.channels);
}

void GradientTape::backward() {
  for (size_t i = records_.size(); i-- > 0;) {
    records_[i]();
    backend_.synchronize();
    scratch_.clear();
  }
}

reference::ConvGradients GradientTape::conv_gradients() const {
  reference::ConvGradients out;
  for (const auto& [name, sizes] : conv_sizes_) {
    reference::ConvGradient& g = out[name];
    g.weight.assign(sizes.first, 0.0);
    g.bias.assign(sizes.second, 0.0);
    const auto it = conv_grads_.find(name);
    if (it == conv_grads_.end()) continue;
    std::vector<float> w(sizes.first), b(sizes.second);
    backend_.download(w.data(), it->second.weight.get(), w.size() * sizeof(float));
    backend_.download(b.data(), it->second.bias.get(), b.size() * sizeof(float));
    g.weight.assign(w.begin(), w.end());
    g.bias.assign(b.begin(), b.end());
  }
  return out;
}

}  // namespace lab
