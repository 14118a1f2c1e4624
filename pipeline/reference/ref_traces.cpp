// Traced module forwards: the same arithmetic as ref_modules.cpp (float32 activations, float64
// accumulation), with each convolution split into its pre-activation and SiLU so the backward has z.
#include "pipeline/reference/ref_traces.hpp"

#include <cmath>

#include "kernels/attention/psa_reference.hpp"
#include "pipeline/model/batchnorm_batch.hpp"
#include "pipeline/reference/ref_batchnorm.hpp"
#include "pipeline/reference/ref_ops.hpp"

namespace lab::reference {

namespace {

std::vector<ConvTrace> trace_chain(const std::vector<ConvSpec>& chain, const RefTensor& x) {
  std::vector<ConvTrace> traces;
  for (const ConvSpec& conv : chain) traces.push_back(trace_conv(conv, traces.empty() ? x : traces.back().y));
  return traces;
}

}  // namespace

const RefTensor& C3k2BlockTrace::out(C3k2BlockSpec::Kind kind) const {
  switch (kind) {
    case C3k2BlockSpec::Kind::C3k:
      return c3k.cv3.y;
    case C3k2BlockSpec::Kind::BottleneckPsa:
      return psa.out;
    case C3k2BlockSpec::Kind::Bottleneck:
      break;
  }
  return bottleneck.out;
}

ConvTrace trace_conv(const ConvSpec& spec, const RefTensor& x) {
  ConvTrace t;
  if (spec.batch_statistics) {
    t.u = conv2d_linear(unnormalised_conv(spec), x);
    t.z = batchnorm_batch_forward(spec, t.u);
  } else {
    t.z = conv2d_linear(spec, x);
  }
  t.y = t.z;
  if (spec.silu)
    for (float& v : t.y.values) v = float(double(v) / (1.0 + std::exp(-double(v))));
  return t;
}

BottleneckTrace trace_bottleneck(const BottleneckSpec& spec, const RefTensor& x) {
  BottleneckTrace t;
  t.cv1 = trace_conv(spec.cv1, x);
  t.cv2 = trace_conv(spec.cv2, t.cv1.y);
  t.out = t.cv2.y;
  if (spec.shortcut) add_inplace(t.out, x);
  return t;
}

C3kTrace trace_c3k(const C3kSpec& spec, const RefTensor& x) {
  C3kTrace t;
  t.cv1 = trace_conv(spec.cv1, x);
  for (const BottleneckSpec& b : spec.m)
    t.m.push_back(trace_bottleneck(b, t.m.empty() ? t.cv1.y : t.m.back().out));
  t.cv2 = trace_conv(spec.cv2, x);
  t.cat = concat_channels({&t.m.back().out, &t.cv2.y});
  t.cv3 = trace_conv(spec.cv3, t.cat);
  return t;
}

AttentionTrace trace_attention(const AttentionSpec& spec, const RefTensor& x) {
  AttentionTrace t;
  t.qkv = trace_conv(spec.qkv, x);
  const PsaShape shape{x.batch, spec.num_heads, spec.key_dim, x.height, x.width, double(spec.scale)};
  const PsaAttentionRef core =
      psa_attention_reference(std::vector<double>(t.qkv.y.values.begin(), t.qkv.y.values.end()), shape);
  t.v = RefTensor(x.batch, spec.dim, x.height, x.width);
  t.v.values.assign(core.v.begin(), core.v.end());
  t.pe = trace_conv(spec.pe, t.v);
  t.mixed = RefTensor(x.batch, spec.dim, x.height, x.width);
  t.mixed.values.assign(core.x.begin(), core.x.end());
  add_inplace(t.mixed, t.pe.y);
  t.proj = trace_conv(spec.proj, t.mixed);
  return t;
}

PsaBlockTrace trace_psa_block(const PsaBlockSpec& spec, const RefTensor& x) {
  PsaBlockTrace t;
  t.attn = trace_attention(spec.attn, x);
  t.x1 = x;
  add_inplace(t.x1, t.attn.proj.y);
  t.ffn0 = trace_conv(spec.ffn0, t.x1);
  t.ffn1 = trace_conv(spec.ffn1, t.ffn0.y);
  t.out = t.x1;
  add_inplace(t.out, t.ffn1.y);
  return t;
}

C3k2Trace trace_c3k2(const C3k2Spec& spec, const RefTensor& x) {
  C3k2Trace t;
  t.cv1 = trace_conv(spec.cv1, x);
  std::vector<RefTensor> halves{slice_channels(t.cv1.y, 0, spec.hidden),
                                slice_channels(t.cv1.y, spec.hidden, spec.hidden)};
  std::vector<const RefTensor*> parts{&halves[0], &halves[1]};
  t.m.reserve(spec.m.size());  // parts point into t.m
  for (const C3k2BlockSpec& block : spec.m) {
    const RefTensor& in = *parts.back();
    C3k2BlockTrace b;
    switch (block.kind) {
      case C3k2BlockSpec::Kind::Bottleneck:
        b.bottleneck = trace_bottleneck(block.bottleneck, in);
        break;
      case C3k2BlockSpec::Kind::C3k:
        b.c3k = trace_c3k(block.c3k, in);
        break;
      case C3k2BlockSpec::Kind::BottleneckPsa:
        b.bottleneck = trace_bottleneck(block.bottleneck, in);
        b.psa = trace_psa_block(block.psa, b.bottleneck.out);
        break;
    }
    t.m.push_back(std::move(b));
    parts.push_back(&t.m.back().out(block.kind));
  }
  t.cat = concat_channels(parts);
  t.cv2 = trace_conv(spec.cv2, t.cat);
  return t;
}

SppfTrace trace_sppf(const SppfSpec& spec, const RefTensor& x) {
  SppfTrace t;
  t.cv1 = trace_conv(spec.cv1, x);
  std::vector<const RefTensor*> parts{&t.cv1.y};
  t.pooled.reserve(size_t(spec.pools));
  for (int i = 0; i < spec.pools; ++i) {
    t.pooled.push_back(maxpool_same(*parts.back(), spec.pool_kernel));
    parts.push_back(&t.pooled.back());
  }
  t.cat = concat_channels(parts);
  t.cv2 = trace_conv(spec.cv2, t.cat);
  t.out = t.cv2.y;
  if (spec.shortcut) add_inplace(t.out, x);
  return t;
}

C2PsaTrace trace_c2psa(const C2PsaSpec& spec, const RefTensor& x) {
  C2PsaTrace t;
  t.cv1 = trace_conv(spec.cv1, x);
  const RefTensor a = slice_channels(t.cv1.y, 0, spec.hidden);
  t.b = slice_channels(t.cv1.y, spec.hidden, spec.hidden);
  for (const PsaBlockSpec& block : spec.m)
    t.m.push_back(trace_psa_block(block, t.m.empty() ? t.b : t.m.back().out));
  t.cat = concat_channels({&a, &t.m.back().out});
  t.cv2 = trace_conv(spec.cv2, t.cat);
  return t;
}

HeadTrace trace_head(const std::vector<DetectLevelSpec>& branches, int nc,
                     const std::vector<const RefTensor*>& levels) {
  HeadTrace t;
  const int batch = levels.front()->batch;
  for (const RefTensor* level : levels) t.outputs.anchors += int(level->plane());
  t.outputs.boxes.resize(size_t(batch) * 4 * t.outputs.anchors);
  t.outputs.logits.resize(size_t(batch) * nc * t.outputs.anchors);
  int offset = 0;
  for (size_t i = 0; i < levels.size(); ++i) {
    t.box.push_back(trace_chain(branches[i].box, *levels[i]));
    t.cls.push_back(trace_chain(branches[i].cls, *levels[i]));
    scatter_level(t.box.back().back().y, t.outputs.anchors, offset, t.outputs.boxes);
    scatter_level(t.cls.back().back().y, t.outputs.anchors, offset, t.outputs.logits);
    offset += int(levels[i]->plane());
  }
  return t;
}

}  // namespace lab::reference
