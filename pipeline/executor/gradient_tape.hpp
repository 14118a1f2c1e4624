// GradientTape: reverse-mode differentiation of a forward built from our kernels. Each op runs its forward
// kernels at once and records the backward it needs (what the forward kept: a conv's input and its
// pre-activation z, a pool's input, the attention workspace); backward() replays the records in reverse.
// Tensors are dense float32 [B, C, H, W] device buffers owned by the tape. A tensor's gradient buffer is made
// by its first contribution, written whole when that contribution covers the tensor (GradientWrite::
// Overwrite: no memset), and later contributions add to it (Accumulate). A tensor that needs no gradient
// (the image, a detached feature) gets none, and the ops reading it skip their input gradient. A record
// whose output got no gradient is skipped: its contributions are all zero. Convolutions' folded weight and
// bias gradients are kept per conv name (the BatchNorm chain rule to checkpoint parameters is per channel:
// on the host, pipeline/model/batchnorm_fold). Float32 throughout (fp32 kernels).
#pragma once
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "kernels/nn/conv2d_backward_op.hpp"
#include "kernels/nn/conv2d_op.hpp"
#include "kernels/nn/plane_backward_ops.hpp"
#include "kernels/nn/plane_ops.hpp"
#include "pipeline/model/yolo26_model.hpp"
#include "pipeline/reference/ref_backward_ops.hpp"

namespace lab {

// A tensor of the tape: an index into it and its shape.
struct TapeTensor {
  int id = -1;
  int batch = 0, channels = 0, height = 0, width = 0;
  int64_t plane() const { return int64_t(height) * width; }
  size_t count() const { return size_t(batch) * channels * size_t(plane()); }
};

class GradientTape {
 public:
  explicit GradientTape(Backend& backend);
  ~GradientTape();

  // An uploaded tensor that needs no gradient (the network input).
  TapeTensor constant(const std::vector<float>& values, int batch, int channels, int height, int width);
  // The same values, cut from the tape: no gradient flows back through it (Ultralytics' detach()).
  TapeTensor detach(const TapeTensor& x);

  // act(conv(x) + b) (+ residual), BatchNorm folded (spec.weight / spec.bias).
  TapeTensor conv(const ConvSpec& spec, const TapeTensor& x, const TapeTensor* residual = nullptr);
  TapeTensor slice(const TapeTensor& x, int first, int count);  // channels [first, first + count)
  TapeTensor concat(const std::vector<TapeTensor>& parts);      // along channels
  TapeTensor maxpool(const TapeTensor& x, int kernel);          // stride 1, padding kernel/2
  TapeTensor upsample(const TapeTensor& x);                     // nearest x2
  // PSA attention on qkv [B, nh*(2kd+hd), H, W]: (merged = v @ attn^T, v), as PsaOp::forward.
  std::pair<TapeTensor, TapeTensor> attention(const AttentionSpec& spec, const TapeTensor& qkv);
  // Levels [B, C, h_i, w_i] laid side by side along anchors: [B, C, 1, sum h_i w_i] (a detect head's output).
  TapeTensor anchors(const std::vector<TapeTensor>& levels);

  const DeviceBuffer& buffer(const TapeTensor& t) const;
  // Adds `grad` (a device buffer laid out like t) to t's gradient: the loss's seed.
  void seed(const TapeTensor& t, const DeviceBuffer& grad);
  // Runs the records in reverse; then conv_gradients() holds every conv's folded parameter gradients.
  void backward();
  // d loss / d the folded weight and bias of each conv the forward ran, downloaded (zero for a conv no
  // gradient reached).
  reference::ConvGradients conv_gradients() const;

 private:
  struct Node {
    std::shared_ptr<DeviceBuffer> value;
    DeviceBuffer grad;  // empty until the first contribution
    bool needs_grad = true;
  };
  struct ConvParameterGrads {
    DeviceBuffer weight, bias;
  };

  TapeTensor make(int batch, int channels, int height, int width, bool needs_grad = true);
  float* data(const TapeTensor& t) const;
  PlaneView view(const TapeTensor& t) const;
  bool has_grad(const TapeTensor& t) const { return nodes_[size_t(t.id)].grad.get() != nullptr; }
  bool needs_grad(const TapeTensor& t) const { return nodes_[size_t(t.id)].needs_grad; }
  PlaneView grad_view(const TapeTensor& t) const;
  // Where a contribution to all of t's gradient goes, and how: a fresh buffer is overwritten.
  std::pair<PlaneView, GradientWrite> grad_target(const TapeTensor& t);
  // t's gradient channels [first, first + src channels) += src ([batch, channels, plane] view).
  void add_grad(const TapeTensor& t, ConstPlaneView src, int first, int channels);
  // A temporary of the running record, freed after it (backward() waits for its launches first).
  DeviceBuffer& scratch(size_t floats);
  DeviceBuffer& zeros(size_t floats);  // a zero-filled scratch
  void record(std::function<void()> backward) { records_.push_back(std::move(backward)); }

  Backend& backend_;
  NnKernels kernels_;
  NnBackwardKernels backward_kernels_;
  CopyPlanesOp copy_;
  AddPlanesOp add_;
  UpsampleNearest2xOp upsample_;
  UpsampleNearest2xBackwardOp upsample_backward_;
  std::vector<Node> nodes_;
  std::vector<std::function<void()>> records_;
  std::deque<DeviceBuffer> scratch_;
  // What the records use, kept for their lifetime.
  std::vector<std::unique_ptr<Conv2dOp>> convs_;
  std::vector<std::unique_ptr<Conv2dBackwardOp>> conv_backwards_;
  std::map<std::string, ConvParameterGrads> conv_grads_;
  std::map<std::string, std::pair<size_t, size_t>> conv_sizes_;  // weight, bias floats
};

}  // namespace lab
