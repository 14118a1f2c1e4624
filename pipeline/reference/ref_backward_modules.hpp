// The reference backward of each YOLO26 module (spec/yolo26.md), the reverse of ref_traces.cpp step by step.
// Every function takes the module's spec, its input x, the trace its forward kept and d loss / d its
// output; it adds the gradients of the module's folded convolution parameters to `grads` and returns
// d loss / d x. The arithmetic lives in ref_backward_ops (convolution, pools, upsample) and in
// kernels/attention/psa_reference (the attention core); these functions only walk the structure.
#pragma once
#include <vector>

#include "pipeline/reference/ref_backward_ops.hpp"
#include "pipeline/reference/ref_traces.hpp"

namespace lab::reference {

RefGrad backward_conv(const ConvSpec& spec, const RefTensor& x, const ConvTrace& trace, const RefGrad& dy,
                      ConvGradients& grads, bool input_grad = true);
RefGrad backward_bottleneck(const BottleneckSpec& spec, const RefTensor& x, const BottleneckTrace& trace,
                            const RefGrad& dy, ConvGradients& grads);
RefGrad backward_c3k(const C3kSpec& spec, const RefTensor& x, const C3kTrace& trace, const RefGrad& dy,
                     ConvGradients& grads);
RefGrad backward_attention(const AttentionSpec& spec, const RefTensor& x, const AttentionTrace& trace,
                           const RefGrad& dy, ConvGradients& grads);
RefGrad backward_psa_block(const PsaBlockSpec& spec, const RefTensor& x, const PsaBlockTrace& trace,
                           const RefGrad& dy, ConvGradients& grads);
RefGrad backward_c3k2(const C3k2Spec& spec, const RefTensor& x, const C3k2Trace& trace, const RefGrad& dy,
                      ConvGradients& grads);
RefGrad backward_sppf(const SppfSpec& spec, const RefTensor& x, const SppfTrace& trace, const RefGrad& dy,
                      ConvGradients& grads);
RefGrad backward_c2psa(const C2PsaSpec& spec, const RefTensor& x, const C2PsaTrace& trace, const RefGrad& dy,
                       ConvGradients& grads);

// One head's branches from d loss / d its raw outputs, d_boxes [B, 4, A] and d_logits [B, nc, A] (levels
// concatenated). Returns d loss / d each level's features, or nothing when !input_grad (a head that reads
// detached features: its parameters get gradients, the features none).
std::vector<RefGrad> backward_head(const std::vector<DetectLevelSpec>& branches,
                                   const std::vector<const RefTensor*>& levels, const HeadTrace& trace,
                                   const std::vector<double>& d_boxes, const std::vector<double>& d_logits,
                                   ConvGradients& grads, bool input_grad);

}  // namespace lab::reference
