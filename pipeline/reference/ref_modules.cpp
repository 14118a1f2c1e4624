// Module references: each follows the spec's forward literally, storing float32 between convolutions.
#include "pipeline/reference/ref_modules.hpp"

#include <algorithm>

#include "pipeline/reference/ref_attention.hpp"
#include "pipeline/reference/ref_ops.hpp"

namespace lab::reference {

namespace {

RefTensor run_bottleneck(const BottleneckSpec& spec, const RefTensor& x) {
  RefTensor y = conv2d(spec.cv2, conv2d(spec.cv1, x));
  if (spec.shortcut) add_inplace(y, x);
  return y;
}

RefTensor run_c3k(const C3kSpec& spec, const RefTensor& x) {
  RefTensor a = conv2d(spec.cv1, x);
  for (const BottleneckSpec& b : spec.m) a = run_bottleneck(b, a);
  const RefTensor side = conv2d(spec.cv2, x);
  return conv2d(spec.cv3, concat_channels({&a, &side}));
}

RefTensor run_psa_block(const PsaBlockSpec& spec, const RefTensor& x, AttentionMaps& maps) {
  AttentionResult attn = attention(spec.attn, x);
  const int heads = spec.attn.num_heads;
  const int64_t n = int64_t(x.plane());
  maps["attn." + spec.attn.name] =
      NamedTensor{"attn." + spec.attn.name, {x.batch, heads, n, n}, std::move(attn.probabilities)};
  RefTensor y = x;
  add_inplace(y, attn.out);
  const RefTensor ffn = conv2d(spec.ffn1, conv2d(spec.ffn0, y));
  add_inplace(y, ffn);
  return y;
}

// Runs a chain of convolutions.
RefTensor run_chain(const std::vector<ConvSpec>& chain, const RefTensor& x) {
  RefTensor y = conv2d(chain.front(), x);
  for (size_t i = 1; i < chain.size(); ++i) y = conv2d(chain[i], y);
  return y;
}

}  // namespace

void scatter_level(const RefTensor& level, int anchors, int offset, std::vector<float>& dst) {
  for (int b = 0; b < level.batch; ++b)
    for (int c = 0; c < level.channels; ++c)
      std::copy_n(level.channel(b, c), level.plane(),
                  dst.data() + (size_t(b) * level.channels + c) * anchors + offset);
}

RefTensor run_c3k2(const C3k2Spec& spec, const RefTensor& x, AttentionMaps& maps) {
  const RefTensor both = conv2d(spec.cv1, x);
  std::vector<RefTensor> ys;
  ys.reserve(2 + spec.m.size());
  ys.push_back(slice_channels(both, 0, spec.hidden));
  ys.push_back(slice_channels(both, spec.hidden, spec.hidden));
  for (const C3k2BlockSpec& block : spec.m) {
    const RefTensor& in = ys.back();
    switch (block.kind) {
      case C3k2BlockSpec::Kind::Bottleneck:
        ys.push_back(run_bottleneck(block.bottleneck, in));
        break;
      case C3k2BlockSpec::Kind::C3k:
        ys.push_back(run_c3k(block.c3k, in));
        break;
      case C3k2BlockSpec::Kind::BottleneckPsa:
        ys.push_back(run_psa_block(block.psa, run_bottleneck(block.bottleneck, in), maps));
        break;
    }
  }
  std::vector<const RefTensor*> parts;
  for (const RefTensor& y : ys) parts.push_back(&y);
  return conv2d(spec.cv2, concat_channels(parts));
}

RefTensor run_sppf(const SppfSpec& spec, const RefTensor& x) {
  std::vector<RefTensor> ys{conv2d(spec.cv1, x)};
  for (int i = 0; i < spec.pools; ++i) ys.push_back(maxpool_same(ys.back(), spec.pool_kernel));
  std::vector<const RefTensor*> parts;
  for (const RefTensor& y : ys) parts.push_back(&y);
  RefTensor out = conv2d(spec.cv2, concat_channels(parts));
  if (spec.shortcut) add_inplace(out, x);
  return out;
}

RefTensor run_c2psa(const C2PsaSpec& spec, const RefTensor& x, AttentionMaps& maps) {
  const RefTensor both = conv2d(spec.cv1, x);
  const RefTensor a = slice_channels(both, 0, spec.hidden);
  RefTensor b = slice_channels(both, spec.hidden, spec.hidden);
  for (const PsaBlockSpec& block : spec.m) b = run_psa_block(block, b, maps);
  return conv2d(spec.cv2, concat_channels({&a, &b}));
}

HeadOutputs run_detect(const std::vector<DetectLevelSpec>& branches, int nc,
                       const std::vector<const RefTensor*>& levels) {
  HeadOutputs out;
  const int batch = levels.front()->batch;
  for (const RefTensor* level : levels) out.anchors += int(level->plane());
  out.boxes.resize(size_t(batch) * 4 * out.anchors);
  out.logits.resize(size_t(batch) * nc * out.anchors);
  int offset = 0;
  for (size_t i = 0; i < levels.size(); ++i) {
    scatter_level(run_chain(branches[i].box, *levels[i]), out.anchors, offset, out.boxes);
    scatter_level(run_chain(branches[i].cls, *levels[i]), out.anchors, offset, out.logits);
    offset += int(levels[i]->plane());
  }
  return out;
}

}  // namespace lab::reference
