// The YOLO26 detection network as a plain description built from a checkpoint: every Conv with its
// BatchNorm folded (w' = w*gamma/sqrt(var+eps), b' = beta - gamma*mean/sqrt(var+eps)) beside the checkpoint's
// own parameters (for gradients, pipeline/model/batchnorm_fold.hpp), and the module structure of
// spec/yolo26.md. Both executors walk this: the CPU reference forward (pipeline/reference/)
// and the kernel forward (pipeline/executor/). Nothing here runs anything.
#pragma once
#include <optional>
#include <string>
#include <vector>

#include "pipeline/checkpoint/checkpoint.hpp"

namespace lab {

// An Ultralytics Conv's BatchNorm2d in eval mode: the checkpoint's affine parameters and running statistics
// (frozen), and eps (not stored in the state dict; 1e-3, the Ultralytics default).
struct FrozenBatchNorm {
  std::vector<float> gamma, beta, mean, var;  // [c_out] each: bn.weight, bn.bias, bn.running_mean/var
  double eps = 1e-3;
};

// Conv2d (+ folded BN) (+ SiLU). Padding is kernel/2 on every side.
struct ConvSpec {
  std::string name;  // state-dict prefix of the module, e.g. "model.2.m.0.cv1" or "model.23.one2one_cv2.0.2"
  int c_in = 0, c_out = 0, kernel = 1, stride = 1, groups = 1;
  bool silu = true;
  std::vector<float> weight;  // [c_out, c_in/groups, kernel, kernel], BN folded
  std::vector<float> bias;    // [c_out], BN folded (or the Conv2d bias of the head's last convs)
  // The checkpoint's parameters behind weight/bias: an Ultralytics Conv keeps its conv.weight and bn here;
  // a plain Conv2d with bias (no bn) has them as weight/bias themselves and conv_weight stays empty.
  std::vector<float> conv_weight;  // [c_out, c_in/groups, kernel, kernel], "<name>.conv.weight"
  std::optional<FrozenBatchNorm> bn;
  // With bn: normalise with the batch's own statistics (BatchNorm in train mode, batchnorm_batch.hpp)
  // instead of running weight/bias; set by use_batch_statistics for training from scratch.
  bool batch_statistics = false;
  int out_size(int in_size) const { return (in_size + 2 * (kernel / 2) - kernel) / stride + 1; }
};

struct BottleneckSpec {
  ConvSpec cv1, cv2;
  bool shortcut = true;  // x + cv2(cv1(x)) (only when c_in == c_out)
};

struct AttentionSpec {
  std::string name;  // "model.10.m.0.attn": also the golden key suffix of its probability map
  int dim = 0, num_heads = 0, key_dim = 0, head_dim = 0;
  float scale = 0;  // key_dim ** -0.5
  ConvSpec qkv, proj, pe;
};

struct PsaBlockSpec {
  AttentionSpec attn;
  ConvSpec ffn0, ffn1;  // ffn1 without SiLU
  bool shortcut = true;
};

struct C3kSpec {
  ConvSpec cv1, cv2, cv3;
  std::vector<BottleneckSpec> m;
};

// One block of a C3k2: Bottleneck, C3k, or Sequential(Bottleneck, PSABlock).
struct C3k2BlockSpec {
  enum class Kind { Bottleneck, C3k, BottleneckPsa } kind = Kind::Bottleneck;
  BottleneckSpec bottleneck;  // Bottleneck and BottleneckPsa
  C3kSpec c3k;                // C3k
  PsaBlockSpec psa;           // BottleneckPsa
};

struct C3k2Spec {
  int hidden = 0;  // c: cv1 has 2c outputs, each block maps c -> c, cv2 reads (2+n)c
  ConvSpec cv1, cv2;
  std::vector<C3k2BlockSpec> m;
};

struct SppfSpec {
  ConvSpec cv1, cv2;  // cv1 without SiLU
  int pool_kernel = 5, pools = 3;
  bool shortcut = true;
};

struct C2PsaSpec {
  int hidden = 0;
  ConvSpec cv1, cv2;
  std::vector<PsaBlockSpec> m;
};

struct DetectLevelSpec {
  int stride = 8;
  std::vector<ConvSpec> box;  // Conv 3x3, Conv 3x3, Conv2d 1x1 -> 4 (bias, no activation)
  std::vector<ConvSpec> cls;  // DWConv 3x3, Conv 1x1, DWConv 3x3, Conv 1x1, Conv2d 1x1 -> nc (bias, no activation)
};

struct DetectSpec {
  int nc = 80;
  int max_det = 300;
  std::vector<DetectLevelSpec> levels;     // P3, P4, P5 (the one2one branches: inference and the o2o loss)
  std::vector<DetectLevelSpec> one2many;   // P3, P4, P5 (cv2/cv3, for training); empty when the checkpoint
                                           // has no one-to-many head (a fused inference export)
};

struct LayerSpec {
  enum class Kind { Conv, C3k2, Sppf, C2Psa, Upsample, Concat, Detect } kind = Kind::Conv;
  int index = 0;
  std::vector<int> from;  // -1 = previous layer, else an absolute layer index
  int out_channels = 0;
  int stride = 1;  // spatial downsampling of the output relative to the network input
  ConvSpec conv;
  C3k2Spec c3k2;
  SppfSpec sppf;
  C2PsaSpec c2psa;
  DetectSpec detect;
};

struct Yolo26Model {
  std::string source;  // checkpoint path
  std::string scale;   // "n".."x" (from model.yaml, or derived from the weight shapes)
  int nc = 0;
  std::vector<std::string> class_names;
  std::vector<LayerSpec> layers;  // 0..23; layer 23 is Detect

  // Builds the description; throws UsageError naming the checkpoint file and the key on a missing tensor or a
  // shape that contradicts the config.
  static Yolo26Model from_checkpoint(const Checkpoint& checkpoint);
  const AttentionSpec* attention(const std::string& name) const;  // nullptr when absent
  std::vector<const AttentionSpec*> attentions() const;           // both blocks, in network order
};

}  // namespace lab
