// What the NHWC network shows of itself, in the names and float NCHW shapes of the NCHW network
// (Network::tensor): a layer downloaded and converted on the host, and a PSA block's softmax probabilities
// rebuilt on the host in float64 from the forward's own q and k and its float logsumexp (the NHWC
// attention kernel has no probabilities entry; the same inputs give the same map the kernel normalised).
#pragma once
#include <vector>

#include "pipeline/executor/shape_plan.hpp"
#include "pipeline/network.hpp"

namespace lab {

// [batch, channels, height, width] float values of `a` (elements of a.type).
std::vector<float> download_nhwc(Backend& backend, const NhwcActivation& a);

// "attn.<name>" [B, heads, N, N]: p[b, h, i, j] = exp(scale * q_i . k_j - lse[b * heads + h, i]).
NamedTensor nhwc_attention_map(Backend& backend, const NhwcAttentionRun& run);

}  // namespace lab
