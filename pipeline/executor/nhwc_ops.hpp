// The kernel ops of the 16-bit NHWC network on one backend, made once at load (NetworkOps' twin for
// --layout nhwc): the stem (layer 0) as a Conv2dStemNhwcOp (float FMAs on the float32 input, the output
// rounded once: the image never rounded to 16 bits; where its kernel runs the shape), every other dense conv
// as a Conv2dNhwcOp (wgmma + TMA) with its weights in the kernel's layout, every depthwise conv (the head's
// DWConvs, the PSA blocks' pe) as an NhwcDepthwise, the layer ops (pack_input, maxpool, upsample, copy,
// to_planes) of one element type, and the float32 detect decode per image size. The Detect head's last 1x1
// convs get their outputs padded to 8 channels with zero rows (4 -> 8, nc -> a multiple of 8): NHWC rows are
// 16 bytes; to_planes reads only the real channels.
#pragma once
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "kernels/detect/detect_decode.hpp"
#include "kernels/nn/conv2d_nhwc_op.hpp"
#include "kernels/nn/conv2d_stem_nhwc_op.hpp"
#include "kernels/nn/nhwc_layers_op.hpp"
#include "kernels/nn/precision.hpp"
#include "pipeline/model/yolo26_model.hpp"

namespace lab {

// The stem (layer 0's Conv) when conv2d_stem_nhwc runs its shape (float FMAs on the float input), else null.
const ConvSpec* float_stem(const Yolo26Model& model);

// The element type of the NHWC network at `precision`: fp16, bf16, tf32 values in float (tf32), float with
// 3xTF32 products (fp32).
ActivationType nhwc_activation_type(Precision precision);

// The largest split-K the network's convs may take (conv2d_nhwc_split_k's max_splits), from LAB_CONV_SPLIT_K:
// unset, empty, 0 or 1, none (the default: split-K measured slower on the H200, docs/kernels/nn.md); 2..64,
// the rule with that limit (kConv2dNhwcSplitRule.max_splits is 8). UsageError naming the variable on anything
// else.
int conv_split_limit_from_env();

// The channel tile the network's dense convs take, from LAB_CONV_BLOCK_N: unset, empty or `auto`, per run by
// conv2d_nhwc_block_n (BN 64 where BN 128 leaves SMs idle; returns 0); `128`, the tile rule's BN for every
// run (the behaviour before that rule, for the whole-forward A/B); `64`, at most 64. UsageError naming the
// variable on anything else.
int conv_block_n_from_env();

class NhwcOps {
 public:
  NhwcOps(Backend& backend, const Yolo26Model& model, Precision precision);
  // The modules the constructor and decode() compile (for Backend::precompile).
  static std::vector<CompileRequest> compile_requests(const Yolo26Model& model, Precision precision);

  Backend& backend() const { return backend_; }
  ActivationType type() const { return layers_.type(); }
  const NhwcLayerOps& layers() const { return layers_; }
  // By the spec's state-dict name: a dense conv (groups 1), or a depthwise one (groups = channels).
  const Conv2dNhwcOp& conv(const ConvSpec& spec) const;
  const NhwcDepthwise& depthwise(const ConvSpec& spec) const;
  // The stem op when `spec` is the stem and conv2d_stem_nhwc runs it (it then reads the float input), else
  // null.
  const Conv2dStemNhwcOp* stem(const ConvSpec& spec) const {
    return stem_ && spec.name == stem_name_ ? stem_.get() : nullptr;
  }
  bool has_stem() const { return stem_ != nullptr; }
  // The split-K limit the plans apply (conv_split_limit_from_env() at construction).
  int conv_split_limit() const { return conv_split_limit_; }
  // Made (compiled, anchor grid uploaded) on the first use of an input size in pixels.
  const DetectDecodeOp& decode(int height, int width);

 private:
  Backend& backend_;
  int conv_split_limit_;
  NhwcLayerOps layers_;
  std::map<std::string, std::unique_ptr<Conv2dNhwcOp>> convs_;
  std::map<std::string, std::unique_ptr<NhwcDepthwise>> depthwise_;
  std::string stem_name_;
  std::unique_ptr<Conv2dStemNhwcOp> stem_;
  std::map<std::pair<int, int>, std::unique_ptr<DetectDecodeOp>> decodes_;
};

}  // namespace lab
