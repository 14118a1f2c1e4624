// The whole-network reference backward: a layer walk forward (keeping traces) and one backward, where each
// layer's output gradient is complete once every later consumer has added its share (layers are visited
// from 22 down to 0 and every consumer of layer i comes after it).
#include "pipeline/reference/reference_backward.hpp"

#include <cmath>

#include "nvrtc_runtime/errors.hpp"
#include "pipeline/loss/loss_reference.hpp"
#include "pipeline/model/batchnorm_batch.hpp"
#include "pipeline/model/model_convs.hpp"
#include "pipeline/reference/ref_backward_modules.hpp"
#include "pipeline/reference/ref_ops.hpp"

namespace lab::reference {

namespace {

using Kind = LayerSpec::Kind;

const DetectSpec& detect_of(const Yolo26Model& model) {
  return model.layers.back().detect;
}

// Layer `f` of layer `index`'s `from` list (-1: the previous layer, the input for layer 0).
const RefTensor& source(const NetworkTrace& trace, int index, int f) {
  const int i = f < 0 ? index + f : f;
  return i < 0 ? trace.input : trace.layers[size_t(i)].out;
}

LayerTrace trace_layer(const LayerSpec& layer, const NetworkTrace& trace) {
  const RefTensor& in = source(trace, layer.index, layer.from[0]);
  LayerTrace t;
  switch (layer.kind) {
    case Kind::Conv:
      t.conv = trace_conv(layer.conv, in);
      t.out = t.conv.y;
      break;
    case Kind::C3k2:
      t.c3k2 = trace_c3k2(layer.c3k2, in);
      t.out = t.c3k2.cv2.y;
      break;
    case Kind::Sppf:
      t.sppf = trace_sppf(layer.sppf, in);
      t.out = t.sppf.out;
      break;
    case Kind::C2Psa:
      t.c2psa = trace_c2psa(layer.c2psa, in);
      t.out = t.c2psa.cv2.y;
      break;
    case Kind::Upsample:
      t.out = upsample2x(in);
      break;
    case Kind::Concat: {
      std::vector<const RefTensor*> parts;
      for (int f : layer.from) parts.push_back(&source(trace, layer.index, f));
      t.out = concat_channels(parts);
      break;
    }
    case Kind::Detect:
      throw RuntimeError("reference backward: the Detect layer is traced by trace_head");
  }
  return t;
}

// Adds d loss / d the inputs of `layer` (from its output gradient dy) to the gradients of its sources.
void backward_layer(const LayerSpec& layer, const NetworkTrace& trace, const RefGrad& dy,
                    std::vector<RefGrad>& d_out, ConvGradients& grads) {
  const LayerTrace& t = trace.layers[size_t(layer.index)];
  const RefTensor& in = source(trace, layer.index, layer.from[0]);
  auto add_to_source = [&](int f, const RefGrad& d) {
    const int i = f < 0 ? layer.index + f : f;
    if (i < 0) return;  // the network input needs no gradient
    if (d_out[size_t(i)].values.empty())
      d_out[size_t(i)] = d;
    else
      add_inplace(d_out[size_t(i)], d);
  };
  switch (layer.kind) {
    case Kind::Conv:
      if (layer.index == 0) {  // the image: only the parameter gradients
        backward_conv(layer.conv, in, t.conv, dy, grads, false);
        return;
      }
      add_to_source(layer.from[0], backward_conv(layer.conv, in, t.conv, dy, grads));
      break;
    case Kind::C3k2:
      add_to_source(layer.from[0], backward_c3k2(layer.c3k2, in, t.c3k2, dy, grads));
      break;
    case Kind::Sppf:
      add_to_source(layer.from[0], backward_sppf(layer.sppf, in, t.sppf, dy, grads));
      break;
    case Kind::C2Psa:
      add_to_source(layer.from[0], backward_c2psa(layer.c2psa, in, t.c2psa, dy, grads));
      break;
    case Kind::Upsample:
      add_to_source(layer.from[0], upsample2x_backward(dy));
      break;
    case Kind::Concat: {
      int c0 = 0;
      for (int f : layer.from) {
        const int channels = source(trace, layer.index, f).channels;
        add_to_source(f, slice_grad(dy, c0, channels));
        c0 += channels;
      }
      break;
    }
    case Kind::Detect:
      throw RuntimeError("reference backward: the Detect layer goes backwards in backward_head");
  }
}

}  // namespace

NetworkTrace trace_network(const Yolo26Model& model, const RefTensor& input) {
  const DetectSpec& detect = detect_of(model);
  if (detect.one2many.empty())
    throw UsageError(model.source +
                     ": the checkpoint has no one-to-many head (model.23.cv2/cv3), which "
                     "training needs");
  const int max_stride = model.layers.back().stride;
  if (input.height <= 0 || input.width <= 0 || input.height % max_stride || input.width % max_stride)
    throw UsageError("input " + std::to_string(input.height) + "x" + std::to_string(input.width) +
                     ": height and width must be positive multiples of " + std::to_string(max_stride));
  NetworkTrace trace;
  trace.input = input;
  trace.layers.reserve(model.layers.size() - 1);
  for (const LayerSpec& layer : model.layers)
    if (layer.kind != Kind::Detect) trace.layers.push_back(trace_layer(layer, trace));
  const std::vector<const RefTensor*> levels = head_levels(model, trace);
  trace.one2many = trace_head(detect.one2many, detect.nc, levels);
  trace.one2one = trace_head(detect.levels, detect.nc, levels);
  return trace;
}

std::vector<const RefTensor*> head_levels(const Yolo26Model& model, const NetworkTrace& trace) {
  std::vector<const RefTensor*> levels;
  for (int f : model.layers.back().from) levels.push_back(&trace.layers[size_t(f)].out);
  return levels;
}

ConvGradients backward_network(const Yolo26Model& model, const NetworkTrace& trace,
                               const loss::HeadGradients<double>& d_one2many,
                               const loss::HeadGradients<double>& d_one2one) {
  const DetectSpec& detect = detect_of(model);
  const std::vector<const RefTensor*> levels = head_levels(model, trace);
  ConvGradients grads;
  backward_head(detect.levels, levels, trace.one2one, d_one2one.boxes, d_one2one.scores, grads, false);
  const std::vector<RefGrad> d_levels = backward_head(detect.one2many, levels, trace.one2many,
                                                      d_one2many.boxes, d_one2many.scores, grads, true);

  std::vector<RefGrad> d_out(trace.layers.size());
  const std::vector<int>& from = model.layers.back().from;
  for (size_t i = 0; i < from.size(); ++i) d_out[size_t(from[i])] = d_levels[i];
  for (size_t i = trace.layers.size(); i-- > 0;) {
    if (d_out[i].values.empty()) d_out[i] = zero_grad_like(trace.layers[i].out);
    backward_layer(model.layers[i], trace, d_out[i], d_out, grads);
    d_out[i] = RefGrad();  // every consumer is done with it
  }
  return grads;
}

loss::LossBatch loss_batch(const Yolo26Model& model, const NetworkTrace& trace,
                           const std::vector<std::vector<loss::GtBox>>& ground_truth) {
  loss::LossBatch batch;
  batch.batch = trace.input.batch;
  batch.num_classes = detect_of(model).nc;
  batch.image_height = trace.input.height;
  batch.image_width = trace.input.width;
  batch.anchors = make_anchor_grid(batch.image_height, batch.image_width);
  batch.one2many = {trace.one2many.outputs.boxes, trace.one2many.outputs.logits};
  batch.one2one = {trace.one2one.outputs.boxes, trace.one2one.outputs.logits};
  batch.ground_truth = ground_truth;
  return batch;
}

std::vector<ParameterGradient> parameter_gradients(const Yolo26Model& model, const ConvGradients& grads) {
  std::vector<ParameterGradient> out;
  for_each_conv(model, [&](const ConvSpec& conv) {
    const auto it = grads.find(conv.name);
    const std::vector<double> zero_weight(conv.weight.size()), zero_channel(size_t(conv.c_out));
    const ConvGradient zero{zero_weight, zero_channel, zero_channel, zero_channel};
    const ConvGradient& g = it == grads.end() ? zero : it->second;
    for (ParameterGradient& p : conv.batch_statistics
                                    ? batch_statistics_parameter_gradients(conv, g.weight, g.gamma, g.beta)
                                    : conv_parameter_gradients(conv, g.weight, g.bias))
      out.push_back(std::move(p));
  });
  return out;
}

NetworkGradients reference_gradients(const Yolo26Model& model, const RefTensor& input,
                                     const std::vector<std::vector<loss::GtBox>>& ground_truth,
                                     const loss::LossConfig& config) {
  const NetworkTrace trace = trace_network(model, input);
  NetworkGradients out;
  out.batch = loss_batch(model, trace, ground_truth);
  out.loss = loss::reference_loss(out.batch, config);
  const ConvGradients grads = backward_network(model, trace, out.loss.d_one2many, out.loss.d_one2one);
  out.parameters = parameter_gradients(model, grads);
  for (const auto& [name, g] : grads)
    if (g.batch.count > 0) out.batch_statistics[name] = g.batch;
  double sum = 0;
  for (const ParameterGradient& p : out.parameters)
    for (double v : p.values) sum += v * v;
  out.norm = std::sqrt(sum);
  return out;
}

}  // namespace lab::reference
