// The float64 reference backward of the whole YOLO26 network: the traced forward of every layer and both
// heads, the loss seed (pipeline/loss's reference_loss on both heads' raw outputs), and the reverse walk
// layer by layer down to layer 0; gradients reported in the checkpoint's own parameters. BatchNorm is
// frozen (folded with its running statistics); the one-to-one head reads detached features, as Ultralytics'
// end-to-end Detect head does in training: its parameters get gradients, the backbone and neck get theirs
// through the one-to-many head only.
#pragma once
#include <map>
#include <string>
#include <vector>

#include "pipeline/loss/loss_types.hpp"
#include "pipeline/model/batchnorm_fold.hpp"
#include "pipeline/model/yolo26_model.hpp"
#include "pipeline/reference/ref_backward_ops.hpp"
#include "pipeline/reference/ref_traces.hpp"

namespace lab::reference {

// What one layer's forward kept; `out` is the layer's output.
struct LayerTrace {
  ConvTrace conv;
  C3k2Trace c3k2;
  SppfTrace sppf;
  C2PsaTrace c2psa;
  RefTensor out;
};

struct NetworkTrace {
  RefTensor input;
  std::vector<LayerTrace> layers;  // 0..22
  HeadTrace one2many, one2one;
};

// The forward of layers 0..22 and both heads; UsageError when the model has no one-to-many head or the
// input size is not a multiple of the largest stride.
NetworkTrace trace_network(const Yolo26Model& model, const RefTensor& input);

// The Detect head's input features (layers 16, 19, 22) of a trace.
std::vector<const RefTensor*> head_levels(const Yolo26Model& model, const NetworkTrace& trace);

// The gradients of every convolution's folded parameters from d loss / d the raw outputs of both heads
// ([B, 4, A] boxes and [B, nc, A] logits each).
ConvGradients backward_network(const Yolo26Model& model, const NetworkTrace& trace,
                               const loss::HeadGradients<double>& d_one2many,
                               const loss::HeadGradients<double>& d_one2one);

// The loss batch of a traced forward: both heads' raw outputs, the anchor grid and the ground truth.
loss::LossBatch loss_batch(const Yolo26Model& model, const NetworkTrace& trace,
                           const std::vector<std::vector<loss::GtBox>>& ground_truth);

// The checkpoint parameters' gradients, in for_each_conv order.
std::vector<ParameterGradient> parameter_gradients(const Yolo26Model& model, const ConvGradients& grads);

struct NetworkGradients {
  loss::LossBatch batch;  // both heads' raw outputs and the ground truth the loss saw
  loss::LossResultT<double> loss;
  std::vector<ParameterGradient> parameters;  // for_each_conv order
  double norm = 0;                            // L2 norm over all of them
  // By conv name, the batch-statistics convs' statistics (for the running statistics' update).
  std::map<std::string, ConvBatchStatistics> batch_statistics;
};

// Forward, loss (reference_loss, both heads) and backward of one batch.
NetworkGradients reference_gradients(const Yolo26Model& model, const RefTensor& input,
                                     const std::vector<std::vector<loss::GtBox>>& ground_truth,
                                     const loss::LossConfig& config);

}  // namespace lab::reference
