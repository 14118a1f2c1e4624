// The reference forward that keeps what the backward needs: every module's forward of ref_modules.cpp
// again, returning a trace with each convolution's pre-activation and output and the tensors its backward
// reads (concatenations, pooled maps, the attention's qkv and v). Activations are float32 as in the
// inference reference; the attention core runs in float64 (kernels/attention/psa_reference).
#pragma once
#include <vector>

#include "pipeline/model/yolo26_model.hpp"
#include "pipeline/reference/ref_modules.hpp"
#include "pipeline/reference/ref_tensor.hpp"

namespace lab::reference {

struct ConvTrace {
  RefTensor z;  // pre-activation conv(x) + b, or BatchNorm(u) with batch statistics
  RefTensor y;  // act(z): the output
  RefTensor u;  // batch-statistics BatchNorm: conv(x) before it (empty otherwise)
};

struct BottleneckTrace {
  ConvTrace cv1, cv2;
  RefTensor out;  // cv2.y (+ x)
};

struct C3kTrace {
  ConvTrace cv1;
  std::vector<BottleneckTrace> m;
  ConvTrace cv2;
  RefTensor cat;  // [m(cv1(x)), cv2(x)]: cv3's input
  ConvTrace cv3;  // cv3.y is the output
};

struct AttentionTrace {
  ConvTrace qkv;
  RefTensor v;  // [B, dim, H, W]: the values, pe's input
  ConvTrace pe;
  RefTensor mixed;  // v @ attn^T + pe(v): proj's input
  ConvTrace proj;   // proj.y is the output
};

struct PsaBlockTrace {
  AttentionTrace attn;
  RefTensor x1;  // x + attn(x): the ffn's input
  ConvTrace ffn0, ffn1;
  RefTensor out;  // x1 + ffn(x1)
};

struct C3k2BlockTrace {
  BottleneckTrace bottleneck;  // Bottleneck and BottleneckPsa
  C3kTrace c3k;                // C3k
  PsaBlockTrace psa;           // BottleneckPsa (reads bottleneck.out)
  const RefTensor& out(C3k2BlockSpec::Kind kind) const;
};

struct C3k2Trace {
  ConvTrace cv1;
  std::vector<C3k2BlockTrace> m;
  RefTensor cat;  // [a, b, m0, m1, ...]: cv2's input
  ConvTrace cv2;  // cv2.y is the output
};

struct SppfTrace {
  ConvTrace cv1;
  std::vector<RefTensor> pooled;  // y1..y3 (y0 is cv1.y)
  RefTensor cat;
  ConvTrace cv2;
  RefTensor out;  // cv2.y (+ x)
};

struct C2PsaTrace {
  ConvTrace cv1;
  RefTensor b;  // the second half of cv1.y: the first PSABlock's input
  std::vector<PsaBlockTrace> m;
  RefTensor cat;  // [a, m(b)]
  ConvTrace cv2;  // cv2.y is the output
};

// One head's branches: per level the box and class chains.
struct HeadTrace {
  std::vector<std::vector<ConvTrace>> box, cls;  // [level][conv]
  HeadOutputs outputs;                           // [B, 4, A] and [B, nc, A], levels concatenated
};

ConvTrace trace_conv(const ConvSpec& spec, const RefTensor& x);
BottleneckTrace trace_bottleneck(const BottleneckSpec& spec, const RefTensor& x);
C3kTrace trace_c3k(const C3kSpec& spec, const RefTensor& x);
AttentionTrace trace_attention(const AttentionSpec& spec, const RefTensor& x);
PsaBlockTrace trace_psa_block(const PsaBlockSpec& spec, const RefTensor& x);
C3k2Trace trace_c3k2(const C3k2Spec& spec, const RefTensor& x);
SppfTrace trace_sppf(const SppfSpec& spec, const RefTensor& x);
C2PsaTrace trace_c2psa(const C2PsaSpec& spec, const RefTensor& x);
HeadTrace trace_head(const std::vector<DetectLevelSpec>& branches, int nc,
                     const std::vector<const RefTensor*>& levels);

}  // namespace lab::reference
