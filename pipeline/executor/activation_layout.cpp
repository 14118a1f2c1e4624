// The layout choice: the option's names, and what the NHWC network needs of the precision, the backend and
// the model (16-byte NHWC rows: every channel slice starts at a multiple of 8 channels).
#include "pipeline/executor/activation_layout.hpp"

#include "kernels/attention/psa_op.hpp"
#include "kernels/nn/conv2d_nhwc_op.hpp"
#include "nvrtc_runtime/backend.hpp"
#include "nvrtc_runtime/errors.hpp"
#include "pipeline/executor/model_walk.hpp"
#include "pipeline/executor/network_ops.hpp"
#include "pipeline/executor/nhwc_ops.hpp"

namespace lab {
namespace {

std::string layer_label(const LayerSpec& l) {
  return std::string("layer") + (l.index < 10 ? "0" : "") + std::to_string(l.index);
}

// A channel split at `channels` (a C2f chunk, an SPPF pool slice, a concat input) of layer `l`.
std::string split_problem(const LayerSpec& l, const std::string& what, int channels) {
  if (channels % 8 == 0) return "";
  return layer_label(l) + ": " + what + " at channel offset " + std::to_string(channels) +
         " (NHWC slices start at multiples of 8 channels)";
}

std::string conv_problem(const LayerSpec& l, const ConvSpec& c) {
  if (c.groups != 1) {
    if (c.groups == c.c_in && c.c_in == c.c_out && c.kernel == 3 && c.stride == 1) return "";
    return layer_label(l) + ": " + c.name + " is a grouped conv the NHWC depthwise kernel does not run";
  }
  const std::string p = conv2d_nhwc_problem(conv_shape(c));
  return p.empty() ? "" : layer_label(l) + ": " + c.name + ": " + p;
}

std::string layer_problem(const Yolo26Model& model, const LayerSpec& l) {
  using K = LayerSpec::Kind;
  std::string p;
  auto check = [&p](const std::string& q) {
    if (p.empty()) p = q;
  };
  auto attention = [&](const AttentionSpec& a) {
    if (a.head_dim != 2 * a.key_dim || !psa_fused_problem(a.key_dim).empty())
      check(layer_label(l) + ": " + a.name + " (key_dim " + std::to_string(a.key_dim) + ", head_dim " +
            std::to_string(a.head_dim) + ") has no NHWC attention kernel");
  };
  if (l.kind == K::Detect) {
    // The last 1x1 convs of each branch get their outputs padded to 8 channels.
    for (const DetectLevelSpec& level : l.detect.levels)
      for (const std::vector<ConvSpec>* branch : {&level.box, &level.cls})
        for (size_t i = 0; i + 1 < branch->size(); ++i) check(conv_problem(l, (*branch)[i]));
    return p;
  }
  for_each_conv(l, [&](const ConvSpec& c) { check(conv_problem(l, c)); });
  if (l.kind == K::C3k2) {
    check(split_problem(l, "a C3k2 chunk", l.c3k2.hidden));
    for (const C3k2BlockSpec& b : l.c3k2.m) {
      if (b.kind == C3k2BlockSpec::Kind::C3k) check(split_problem(l, "a C3k half", b.c3k.cv1.c_out));
      if (b.kind == C3k2BlockSpec::Kind::BottleneckPsa) attention(b.psa.attn);
    }
  }
  if (l.kind == K::Sppf) check(split_problem(l, "a pooled slice", l.sppf.cv1.c_out));
  if (l.kind == K::C2Psa) {
    check(split_problem(l, "the PSA half", l.c2psa.hidden));
    for (const PsaBlockSpec& b : l.c2psa.m) attention(b.attn);
  }
  if (l.kind == K::Concat) {
    int offset = 0;
    for (int f : l.from) {
      check(split_problem(l, "a concatenated input", offset));
      const int src = f < 0 ? l.index + f : f;
      offset += model.layers[size_t(src)].out_channels;
    }
  }
  return p;
}

}  // namespace

std::string layout_name(ActivationLayout layout) {
  return layout == ActivationLayout::Nhwc ? "nhwc" : "nchw";
}

LayoutChoice parse_layout_choice(const std::string& value) {
  if (value == "auto") return LayoutChoice::Auto;
  if (value == "nchw") return LayoutChoice::Nchw;
  if (value == "nhwc") return LayoutChoice::Nhwc;
  throw UsageError("--layout " + value + ": unknown (valid: auto, nchw, nhwc)");
}

std::string nhwc_problem(const Yolo26Model& model, const Backend& backend) {
  if (!backend.runs_arch_specific_kernels())
    return "the wgmma / TMA kernels need a Hopper GPU (sm_90a), not " + backend.device().name + " (" +
           backend.device().arch + ")";
  for (const LayerSpec& l : model.layers)
    if (std::string p = layer_problem(model, l); !p.empty()) return p;
  return "";
}

ActivationLayout choose_layout(LayoutChoice choice, const Yolo26Model& model, Precision precision,
                               const Backend& backend) {
  if (choice == LayoutChoice::Nchw) return ActivationLayout::Nchw;
  const std::string problem = nhwc_problem(model, backend);
  if (choice == LayoutChoice::Nhwc && !problem.empty()) throw UsageError("--layout nhwc: " + problem);
  // auto takes bf16 to NHWC only with the float stem (conv2d_stem_nhwc): a bf16 stem on the image rounded to
  // bf16 does not report what fp32 reports. Measured on the cpu emulator, zidane.jpg at 640 square, bf16 NHWC
  // with a bf16 stem: the right person at 0.37 plus a duplicate at 0.27; with the float stem 0.85, one box
  // (fp16 NHWC: 0.92). docs/detect.md, "Activation layout". fp16 and tf32 keep 11 significant bits: any stem.
  const bool accurate = precision != Precision::Bf16 || float_stem(model) != nullptr;
  // fp32 on NHWC (3xTF32 products, worst tensor 7.0e-6 of float64 on the H200 against the 1e-5 bar) where the
  // products run in hardware: on the H200 it took batch 1 from 2.06 to 0.97 ms and batch 32 from 13.8 to 6.49
  // ms (docs/PERFORMANCE.md, seventeenth session); the emulator runs its three passes at half the NCHW
  // network's speed (bus.jpg at 640: 6.5 against 3.2 s), so there it stays on request.
  const bool automatic = accurate && (precision != Precision::Fp32 || backend.has_device_timing());
  return problem.empty() && (choice == LayoutChoice::Nhwc || automatic) ? ActivationLayout::Nhwc
                                                                        : ActivationLayout::Nchw;
}

}  // namespace lab
