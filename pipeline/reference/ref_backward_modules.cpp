// Module backward walks: concat -> split of the gradient, slice -> concat, residual -> the gradient goes
// both ways, reused tensors -> gradients summed.
#include "pipeline/reference/ref_backward_modules.hpp"

#include <algorithm>

#include "kernels/attention/psa_reference.hpp"
#include "pipeline/model/batchnorm_batch.hpp"
#include "pipeline/reference/ref_batchnorm.hpp"
#include "pipeline/reference/ref_ops.hpp"

namespace lab::reference {

namespace {

// The gradient of a channel concatenation split back into `count` parts of `each` channels.
std::vector<RefGrad> split_grad(const RefGrad& d, int count, int each) {
  std::vector<RefGrad> parts;
  for (int i = 0; i < count; ++i) parts.push_back(slice_grad(d, i * each, each));
  return parts;
}

// Channels [offset, offset + H*W) of a [B, C, A] gradient as a [B, C, H, W] level (scatter_level reversed).
RefGrad gather_level(const std::vector<double>& src, int channels, int anchors, int offset,
                     const RefTensor& level) {
  RefGrad d(level.batch, channels, level.height, level.width);
  for (int b = 0; b < level.batch; ++b)
    for (int c = 0; c < channels; ++c) {
      const double* from = src.data() + (size_t(b) * channels + c) * anchors + offset;
      std::copy_n(from, d.plane(), d.channel(b, c));
    }
  return d;
}

// A chain of convolutions backwards; d loss / d its input only when input_grad.
RefGrad backward_chain(const std::vector<ConvSpec>& chain, const RefTensor& x,
                       const std::vector<ConvTrace>& traces, RefGrad d, ConvGradients& grads,
                       bool input_grad) {
  for (size_t j = chain.size(); j-- > 0;)
    d = backward_conv(chain[j], j == 0 ? x : traces[j - 1].y, traces[j], d, grads, j > 0 || input_grad);
  return d;
}

RefGrad backward_c3k2_block(const C3k2BlockSpec& block, const RefTensor& x, const C3k2BlockTrace& trace,
                            const RefGrad& dy, ConvGradients& grads) {
  switch (block.kind) {
    case C3k2BlockSpec::Kind::C3k:
      return backward_c3k(block.c3k, x, trace.c3k, dy, grads);
    case C3k2BlockSpec::Kind::BottleneckPsa:
      return backward_bottleneck(block.bottleneck, x, trace.bottleneck,
                                 backward_psa_block(block.psa, trace.bottleneck.out, trace.psa, dy, grads),
                                 grads);
    case C3k2BlockSpec::Kind::Bottleneck:
      break;
  }
  return backward_bottleneck(block.bottleneck, x, trace.bottleneck, dy, grads);
}

}  // namespace

RefGrad backward_conv(const ConvSpec& spec, const RefTensor& x, const ConvTrace& trace, const RefGrad& dy,
                      ConvGradients& grads, bool input_grad) {
  if (!spec.batch_statistics) return conv2d_backward(spec, x, trace.z, dy, grads, input_grad);
  const RefGrad du = batchnorm_batch_backward(spec, trace.u, dy, grads);
  return conv2d_backward(unnormalised_conv(spec), x, trace.u, du, grads, input_grad);
}

RefGrad backward_bottleneck(const BottleneckSpec& spec, const RefTensor& x, const BottleneckTrace& trace,
                            const RefGrad& dy, ConvGradients& grads) {
  const RefGrad d_mid = backward_conv(spec.cv2, trace.cv1.y, trace.cv2, dy, grads);
  RefGrad dx = backward_conv(spec.cv1, x, trace.cv1, d_mid, grads);
  if (spec.shortcut) add_inplace(dx, dy);
  return dx;
}

RefGrad backward_c3k(const C3kSpec& spec, const RefTensor& x, const C3kTrace& trace, const RefGrad& dy,
                     ConvGradients& grads) {
  const std::vector<RefGrad> d_cat =
      split_grad(backward_conv(spec.cv3, trace.cat, trace.cv3, dy, grads), 2, spec.cv1.c_out);
  RefGrad dx = backward_conv(spec.cv2, x, trace.cv2, d_cat[1], grads);
  RefGrad d = d_cat[0];
  for (size_t i = spec.m.size(); i-- > 0;)
    d = backward_bottleneck(spec.m[i], i == 0 ? trace.cv1.y : trace.m[i - 1].out, trace.m[i], d, grads);
  add_inplace(dx, backward_conv(spec.cv1, x, trace.cv1, d, grads));
  return dx;
}

RefGrad backward_attention(const AttentionSpec& spec, const RefTensor& x, const AttentionTrace& trace,
                           const RefGrad& dy, ConvGradients& grads) {
  const RefGrad d_mixed = backward_conv(spec.proj, trace.mixed, trace.proj, dy, grads);
  const RefGrad d_v = backward_conv(spec.pe, trace.v, trace.pe, d_mixed, grads);  // v also feeds pe
  const PsaShape shape{x.batch, spec.num_heads, spec.key_dim, x.height, x.width, double(spec.scale)};
  RefGrad d_qkv(x.batch, spec.qkv.c_out, x.height, x.width);
  d_qkv.values = psa_attention_backward_reference(
      std::vector<double>(trace.qkv.y.values.begin(), trace.qkv.y.values.end()), d_mixed.values, d_v.values,
      shape);
  return backward_conv(spec.qkv, x, trace.qkv, d_qkv, grads);
}

RefGrad backward_psa_block(const PsaBlockSpec& spec, const RefTensor& x, const PsaBlockTrace& trace,
                           const RefGrad& dy, ConvGradients& grads) {
  RefGrad d_x1 = dy;
  const RefGrad d_hidden = backward_conv(spec.ffn1, trace.ffn0.y, trace.ffn1, dy, grads);
  add_inplace(d_x1, backward_conv(spec.ffn0, trace.x1, trace.ffn0, d_hidden, grads));
  RefGrad dx = d_x1;
  add_inplace(dx, backward_attention(spec.attn, x, trace.attn, d_x1, grads));
  return dx;
}

RefGrad backward_c3k2(const C3k2Spec& spec, const RefTensor& x, const C3k2Trace& trace, const RefGrad& dy,
                      ConvGradients& grads) {
  std::vector<RefGrad> d_parts = split_grad(backward_conv(spec.cv2, trace.cat, trace.cv2, dy, grads),
                                            int(spec.m.size()) + 2, spec.hidden);
  const RefTensor b = slice_channels(trace.cv1.y, spec.hidden, spec.hidden);
  for (size_t i = spec.m.size(); i-- > 0;) {
    const RefTensor& in = i == 0 ? b : trace.m[i - 1].out(spec.m[i - 1].kind);
    add_inplace(d_parts[i + 1], backward_c3k2_block(spec.m[i], in, trace.m[i], d_parts[i + 2], grads));
  }
  return backward_conv(spec.cv1, x, trace.cv1, concat_grads({&d_parts[0], &d_parts[1]}), grads);
}

RefGrad backward_sppf(const SppfSpec& spec, const RefTensor& x, const SppfTrace& trace, const RefGrad& dy,
                      ConvGradients& grads) {
  std::vector<RefGrad> d_parts =
      split_grad(backward_conv(spec.cv2, trace.cat, trace.cv2, dy, grads), spec.pools + 1, spec.cv1.c_out);
  for (int i = spec.pools; i > 0; --i) {
    const RefTensor& pooled_from = i == 1 ? trace.cv1.y : trace.pooled[size_t(i - 2)];
    add_inplace(d_parts[size_t(i - 1)],
                maxpool_same_backward(pooled_from, spec.pool_kernel, d_parts[size_t(i)]));
  }
  RefGrad dx = backward_conv(spec.cv1, x, trace.cv1, d_parts[0], grads);
  if (spec.shortcut) add_inplace(dx, dy);
  return dx;
}

RefGrad backward_c2psa(const C2PsaSpec& spec, const RefTensor& x, const C2PsaTrace& trace, const RefGrad& dy,
                       ConvGradients& grads) {
  const std::vector<RefGrad> d_cat =
      split_grad(backward_conv(spec.cv2, trace.cat, trace.cv2, dy, grads), 2, spec.hidden);
  RefGrad d_b = d_cat[1];
  for (size_t i = spec.m.size(); i-- > 0;)
    d_b = backward_psa_block(spec.m[i], i == 0 ? trace.b : trace.m[i - 1].out, trace.m[i], d_b, grads);
  return backward_conv(spec.cv1, x, trace.cv1, concat_grads({&d_cat[0], &d_b}), grads);
}

std::vector<RefGrad> backward_head(const std::vector<DetectLevelSpec>& branches,
                                   const std::vector<const RefTensor*>& levels, const HeadTrace& trace,
                                   const std::vector<double>& d_boxes, const std::vector<double>& d_logits,
                                   ConvGradients& grads, bool input_grad) {
  std::vector<RefGrad> d_levels;
  const int anchors = trace.outputs.anchors;
  int offset = 0;
  for (size_t i = 0; i < levels.size(); ++i) {
    const RefTensor& level = *levels[i];
    const std::vector<ConvSpec>& box = branches[i].box;
    const std::vector<ConvSpec>& cls = branches[i].cls;
    RefGrad d_box =
        backward_chain(box, level, trace.box[i],
                       gather_level(d_boxes, box.back().c_out, anchors, offset, level), grads, input_grad);
    const RefGrad d_cls =
        backward_chain(cls, level, trace.cls[i],
                       gather_level(d_logits, cls.back().c_out, anchors, offset, level), grads, input_grad);
    if (input_grad) {
      add_inplace(d_box, d_cls);
      d_levels.push_back(std::move(d_box));
    }
    offset += int(level.plane());
  }
  return d_levels;
}

}  // namespace lab::reference
