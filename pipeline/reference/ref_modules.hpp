// Reference of the YOLO26 modules (spec/yolo26.md, Modules and Detect head) built on the elementary ops:
// Bottleneck, C3k, C3k2, SPPF, PSABlock, C2PSA and the Detect branches (either head).
#pragma once
#include <map>
#include <string>
#include <vector>

#include "pipeline/model/yolo26_model.hpp"
#include "pipeline/network.hpp"
#include "pipeline/reference/ref_tensor.hpp"

namespace lab::reference {

// Attention probability maps recorded during a forward, keyed "attn.<attention name>".
using AttentionMaps = std::map<std::string, NamedTensor>;

RefTensor run_c3k2(const C3k2Spec& spec, const RefTensor& x, AttentionMaps& maps);
RefTensor run_sppf(const SppfSpec& spec, const RefTensor& x);
RefTensor run_c2psa(const C2PsaSpec& spec, const RefTensor& x, AttentionMaps& maps);

struct HeadOutputs {
  int anchors = 0;
  std::vector<float> boxes;   // [B, 4, A] raw l, t, r, b in grid units, levels concatenated P3, P4, P5
  std::vector<float> logits;  // [B, nc, A]
};
// Copies a [B, C, H, W] level into columns [offset, offset + H*W) of a [B, C, A] buffer.
void scatter_level(const RefTensor& level, int anchors, int offset, std::vector<float>& dst);

// One head's branches (DetectSpec::levels or ::one2many) over the P3, P4, P5 features.
HeadOutputs run_detect(const std::vector<DetectLevelSpec>& branches, int nc,
                       const std::vector<const RefTensor*>& levels);

}  // namespace lab::reference
