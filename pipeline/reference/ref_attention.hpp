// Reference of the YOLO26 Attention module (spec/yolo26.md, Attention): qkv conv, per-head
// softmax((q*scale)^T k) over keys in float64, v @ attn^T, plus the depthwise positional conv of v, then
// proj.
#pragma once
#include <vector>

#include "pipeline/model/yolo26_model.hpp"
#include "pipeline/reference/ref_tensor.hpp"

namespace lab::reference {

struct AttentionResult {
  RefTensor out;                     // [B, dim, H, W]
  std::vector<float> probabilities;  // [B, heads, N, N], query major, softmax over keys
};

AttentionResult attention(const AttentionSpec& spec, const RefTensor& x);

}  // namespace lab::reference
