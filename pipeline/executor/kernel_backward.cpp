// TrainingPass and kernel_gradients: the module forwards on the gradient tape (the same structure as the
// reference's traced forward, pipeline/reference/ref_traces.cpp), both heads, the device loss, the tape's
// backward.
#include "pipeline/executor/kernel_backward.hpp"

#include <cmath>
#include <tuple>

#include "nvrtc_runtime/errors.hpp"
#include "pipeline/reference/reference_backward.hpp"

namespace lab {

namespace {

using Kind = LayerSpec::Kind;

class NetworkOnTape {
 public:
  explicit NetworkOnTape(GradientTape& tape) : tape_(tape) {}

  TapeTensor bottleneck(const BottleneckSpec& s, const TapeTensor& x) {
    const TapeTensor t = tape_.conv(s.cv1, x);
    return tape_.conv(s.cv2, t, s.shortcut && x.channels == s.cv2.c_out ? &x : nullptr);
  }

  TapeTensor c3k(const C3kSpec& s, const TapeTensor& x) {
    TapeTensor y = tape_.conv(s.cv1, x);
    for (const BottleneckSpec& b : s.m) y = bottleneck(b, y);
    return tape_.conv(s.cv3, tape_.concat({y, tape_.conv(s.cv2, x)}));
  }

  TapeTensor attention_block(const PsaBlockSpec& s, const TapeTensor& x) {
    const AttentionSpec& a = s.attn;
    const auto [merged, v] = tape_.attention(a, tape_.conv(a.qkv, x));
    const TapeTensor mixed = tape_.conv(a.pe, v, &merged);                          // v @ attn^T + pe(v)
    const TapeTensor x1 = tape_.conv(a.proj, mixed, s.shortcut ? &x : nullptr);     // x + attn(x)
    return tape_.conv(s.ffn1, tape_.conv(s.ffn0, x1), s.shortcut ? &x1 : nullptr);  // x1 + ffn(x1)
  }

  TapeTensor c3k2(const C3k2Spec& s, const TapeTensor& x) {
    const TapeTensor y = tape_.conv(s.cv1, x);
    std::vector<TapeTensor> parts{tape_.slice(y, 0, s.hidden), tape_.slice(y, s.hidden, s.hidden)};
    for (const C3k2BlockSpec& block : s.m) {
      const TapeTensor& in = parts.back();
      switch (block.kind) {
        case C3k2BlockSpec::Kind::Bottleneck:
          parts.push_back(bottleneck(block.bottleneck, in));
          break;
        case C3k2BlockSpec::Kind::C3k:
          parts.push_back(c3k(block.c3k, in));
          break;
        case C3k2BlockSpec::Kind::BottleneckPsa:
          parts.push_back(attention_block(block.psa, bottleneck(block.bottleneck, in)));
          break;
      }
    }
    return tape_.conv(s.cv2, tape_.concat(parts));
  }

  TapeTensor sppf(const SppfSpec& s, const TapeTensor& x) {
    std::vector<TapeTensor> parts{tape_.conv(s.cv1, x)};
    for (int i = 0; i < s.pools; ++i) parts.push_back(tape_.maxpool(parts.back(), s.pool_kernel));
    return tape_.conv(s.cv2, tape_.concat(parts), s.shortcut && x.channels == s.cv2.c_out ? &x : nullptr);
  }

  TapeTensor c2psa(const C2PsaSpec& s, const TapeTensor& x) {
    const TapeTensor y = tape_.conv(s.cv1, x);
    TapeTensor b = tape_.slice(y, s.hidden, s.hidden);
    for (const PsaBlockSpec& block : s.m) b = attention_block(block, b);
    return tape_.conv(s.cv2, tape_.concat({tape_.slice(y, 0, s.hidden), b}));
  }

  // One head: per level the box and class chains, laid out as [B, 4, A] and [B, nc, A].
  std::pair<TapeTensor, TapeTensor> head(const std::vector<DetectLevelSpec>& branches,
                                         const std::vector<TapeTensor>& levels) {
    std::vector<TapeTensor> boxes, scores;
    for (size_t i = 0; i < levels.size(); ++i) {
      TapeTensor b = levels[i], c = levels[i];
      for (const ConvSpec& conv : branches[i].box) b = tape_.conv(conv, b);
      for (const ConvSpec& conv : branches[i].cls) c = tape_.conv(conv, c);
      boxes.push_back(b);
      scores.push_back(c);
    }
    return {tape_.anchors(boxes), tape_.anchors(scores)};
  }

  // Layers 0..22: each layer's output.
  std::vector<TapeTensor> layers(const Yolo26Model& model, const TapeTensor& input) {
    std::vector<TapeTensor> out;
    for (const LayerSpec& l : model.layers) {
      if (l.kind == Kind::Detect) break;
      const auto source = [&](int f) {
        const int i = f < 0 ? l.index + f : f;
        return i < 0 ? input : out[size_t(i)];
      };
      const TapeTensor in = source(l.from.empty() ? -1 : l.from[0]);
      switch (l.kind) {
        case Kind::Conv:
          out.push_back(tape_.conv(l.conv, in));
          break;
        case Kind::C3k2:
          out.push_back(c3k2(l.c3k2, in));
          break;
        case Kind::Sppf:
          out.push_back(sppf(l.sppf, in));
          break;
        case Kind::C2Psa:
          out.push_back(c2psa(l.c2psa, in));
          break;
        case Kind::Upsample:
          out.push_back(tape_.upsample(in));
          break;
        case Kind::Concat: {
          std::vector<TapeTensor> parts;
          for (int f : l.from) parts.push_back(source(f));
          out.push_back(tape_.concat(parts));
          break;
        }
        case Kind::Detect:
          break;
      }
    }
    return out;
  }

 private:
  GradientTape& tape_;
};

void check_trainable(const Yolo26Model& model, int height, int width) {
  const LayerSpec& detect_layer = model.layers.back();
  if (detect_layer.kind != Kind::Detect || detect_layer.detect.one2many.empty())
    throw UsageError(model.source +
                     ": the checkpoint has no one-to-many head (model.23.cv2/cv3), which "
                     "training needs");
  if (height <= 0 || width <= 0 || height % detect_layer.stride || width % detect_layer.stride)
    throw UsageError("input " + std::to_string(height) + "x" + std::to_string(width) +
                     ": height and width must be positive multiples of " +
                     std::to_string(detect_layer.stride));
}

bool same_config(const loss::LossConfig& a, const loss::LossConfig& b) {
  const auto same_assigner = [](const loss::AssignerSettings& x, const loss::AssignerSettings& y) {
    return x.topk == y.topk && x.topk2 == y.topk2 && x.alpha == y.alpha && x.beta == y.beta &&
           x.eps == y.eps && x.small_side == y.small_side && x.widened_side == y.widened_side;
  };
  return a.box_gain == b.box_gain && a.cls_gain == b.cls_gain && a.l1_gain == b.l1_gain &&
         a.epoch == b.epoch && a.epochs == b.epochs && same_assigner(a.one2many, b.one2many) &&
         same_assigner(a.one2one, b.one2one);
}

}  // namespace

TrainingPass::TrainingPass(Backend& backend, const Yolo26Model& model, int batch, int height, int width,
                           Precision precision)
    : backend_(backend), batch_(batch), height_(height), width_(width), tape_(backend, precision) {
  check_trainable(model, height, width);
  const LayerSpec& detect_layer = model.layers.back();
  const DetectSpec& detect = detect_layer.detect;
  num_classes_ = detect.nc;
  NetworkOnTape net(tape_);
  input_ = tape_.input(batch, 3, height, width);
  const std::vector<TapeTensor> outputs = net.layers(model, input_);
  std::vector<TapeTensor> levels, detached;
  for (int f : detect_layer.from) {
    levels.push_back(outputs[size_t(f)]);
    detached.push_back(tape_.detach(levels.back()));
  }
  // The one-to-one head reads only detached features: the tape's branch, beside the one-to-many head in the
  // forward and beside everything else in the backward.
  tape_.begin_branch();
  std::tie(o2o_boxes_, o2o_scores_) = net.head(detect.levels, detached);
  tape_.end_branch();
  std::tie(o2m_boxes_, o2m_scores_) = net.head(detect.one2many, levels);
}

const loss::DeviceLossResult& TrainingPass::run(const std::vector<float>& input,
                                                const std::vector<std::vector<loss::GtBox>>& ground_truth,
                                                const loss::LossConfig& config, double loss_scale,
                                                const loss::SumOverRanks& sum_over_ranks) {
  tape_.set_input(input_, input);
  return run_on_input(ground_truth, config, loss_scale, sum_over_ranks);
}

const loss::DeviceLossResult& TrainingPass::run(std::span<const uint8_t> pixels,
                                                const std::vector<std::vector<loss::GtBox>>& ground_truth,
                                                const loss::LossConfig& config, double loss_scale,
                                                const loss::SumOverRanks& sum_over_ranks) {
  tape_.set_input_pixels(input_, pixels);
  return run_on_input(ground_truth, config, loss_scale, sum_over_ranks);
}

const loss::DeviceLossResult& TrainingPass::run_on_device_pixels(
    const uint8_t* device_pixels, const std::vector<std::vector<loss::GtBox>>& ground_truth,
    const loss::LossConfig& config, double loss_scale, const loss::SumOverRanks& sum_over_ranks) {
  tape_.set_input_device_pixels(input_, device_pixels);
  return run_on_input(ground_truth, config, loss_scale, sum_over_ranks);
}

const loss::DeviceLossResult& TrainingPass::run_on_input(const std::vector<std::vector<loss::GtBox>>& ground_truth,
                                                         const loss::LossConfig& config, double loss_scale,
                                                         const loss::SumOverRanks& sum_over_ranks) {
  tape_.forward();
  if (!loss_ || !same_config(loss_->config(), config))
    loss_ = std::make_unique<loss::Yolo26Loss>(backend_, config);
  loss::DeviceLossBatch loss_batch;
  loss_batch.batch = batch_;
  loss_batch.num_classes = num_classes_;
  loss_batch.image_height = height_, loss_batch.image_width = width_;
  loss_batch.one2many = {&tape_.buffer(o2m_boxes_), &tape_.buffer(o2m_scores_)};
  loss_batch.one2one = {&tape_.buffer(o2o_boxes_), &tape_.buffer(o2o_scores_)};
  loss_batch.ground_truth = ground_truth;
  loss_batch.sum_over_ranks = sum_over_ranks;
  // The backward is launched before the host waits for the loss's sums, so the device goes on from the
  // loss's launches to the backward's without a gap.
  loss_->launch_device_into(loss_batch, result_, loss_scale);
  tape_.backward({{o2m_boxes_, &result_.d_one2many_boxes},
                  {o2m_scores_, &result_.d_one2many_scores},
                  {o2o_boxes_, &result_.d_one2one_boxes},
                  {o2o_scores_, &result_.d_one2one_scores}});
  loss_->finish_device(result_);
  return result_;
}

TrainingGradients kernel_gradients(Backend& backend, const Yolo26Model& model,
                                   const std::vector<float>& input, int batch, int height, int width,
                                   const std::vector<std::vector<loss::GtBox>>& ground_truth,
                                   const loss::LossConfig& config) {
  TrainingPass pass(backend, model, batch, height, width);
  const loss::DeviceLossResult& result = pass.run(input, ground_truth, config);
  TrainingGradients g;
  g.one2many = result.one2many, g.one2one = result.one2one;
  g.weights = result.weights, g.total = result.total;
  g.parameters = reference::parameter_gradients(model, pass.tape().conv_gradients());
  g.running_statistics = pass.tape().running_statistics();
  double sum = 0;
  for (const ParameterGradient& p : g.parameters)
    for (double v : p.values) sum += v * v;
  g.norm = std::sqrt(sum);
  return g;
}

}  // namespace lab
