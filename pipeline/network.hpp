// A forward pass of YOLO26 on one executor: the CPU reference (plain C++, float64 accumulation) or our
// run-time-compiled kernels on a Backend (cuda or the cpu emulator). Input: letterboxed images, [B, 3, H, W]
// float RGB in 0..1, H and W multiples of 32. Output: the end-to-end detections of spec/yolo26.md (decode +
// two-stage top-k, no NMS), [B, max_det, 6] = x1, y1, x2, y2 (input pixels), score, class id, sorted by
// score.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "kernels/nn/precision.hpp"
#include "pipeline/executor/activation_layout.hpp"
#include "pipeline/model/yolo26_model.hpp"

namespace lab {

class Backend;

struct NamedTensor {
  std::string name;
  std::vector<int64_t> shape;
  std::vector<float> values;
};

struct StagedLetterbox;  // pipeline/image/staged_letterbox.hpp

// One image of a batch, as it lies in host memory: letterboxed float planes [3, H, W], or (where the network
// letterboxes on the device) a staged letterbox, the source pixels and resize taps.
struct ImageInput {
  ImageInput() = default;
  ImageInput(const float* planes) : nchw(planes) {}
  ImageInput(const StagedLetterbox* block) : staged(block) {}
  const float* nchw = nullptr;
  const StagedLetterbox* staged = nullptr;
};

struct LayerTime {
  std::string name;  // "layer00" .. "layer23", "decode", "topk"
  double ms = 0;
};

class Network {
 public:
  virtual ~Network() = default;
  virtual std::string executor_name() const = 0;  // "reference", "cuda", "cpu"
  // The activation layout between layers: "nchw" (float NCHW; the reference's float64 NCHW too) or "nhwc"
  // (the kernel executor's 16-bit NHWC network, pipeline/executor/activation_layout.hpp).
  virtual std::string activation_layout() const { return "nchw"; }
  virtual void forward(const float* input, int batch, int height, int width) = 0;
  // The same forward over images that lie apart, each at its own address (staging slots): the kernel
  // executor uploads each one into the batch input without assembling the batch on the host, and letterboxes
  // the staged ones there (letterbox_resize); the default assembles the batch and calls forward() (a staged
  // image is a UsageError: see letterboxes_on_device). Returns the milliseconds the input took to reach the
  // network (the uploads and device letterboxes, or the assembly); the rest of the call is the forward.
  virtual double forward_images(const std::vector<ImageInput>& images, int height, int width);
  // Whether forward_images takes staged letterboxes (the kernel executor).
  virtual bool letterboxes_on_device() const { return false; }
  // Builds what a forward of this shape needs (the kernel executor: its modules, arena and captured graph) so
  // that the forward itself only runs; the default has nothing to build.
  virtual void prepare(int /*batch*/, int /*height*/, int /*width*/) {}
  // [batch * max_det * 6] of the last forward.
  virtual std::vector<float> detections() = 0;
  // Names available after a forward: "input", "layer00".."layer22", "head.boxes" [B,4,A] (raw l,t,r,b in grid
  // units), "head.scores" [B,nc,A] (logits), "attn.<attention name>" [B, heads, N, N] (softmax probabilities,
  // query major), "output" [B, max_det, 6]; the reference executor also gives the one-to-many head's
  // "head.one2many.boxes" and "head.one2many.scores" where the model has it.
  virtual std::vector<std::string> tensor_names() const = 0;
  virtual NamedTensor tensor(const std::string& name) = 0;  // UsageError for an unknown name
  // Per-layer times of the last forward, when layer timing is on (the kernel executor then runs layer by
  // layer with events instead of replaying its CUDA graph; the reference executor always measures).
  virtual void set_layer_timing(bool on) = 0;
  virtual std::vector<LayerTime> layer_times() const = 0;
};

std::unique_ptr<Network> make_reference_network(const Yolo26Model& model);
// `precision`: the network's precision; each conv runs at the precision pipeline/executor/precision_policy.hpp
// gives its role (Fp32 keeps every kernel float32). `layout`: the activation layout, or auto's choice
// (pipeline/executor/activation_layout.hpp; UsageError for nhwc where it cannot run).
std::unique_ptr<Network> make_kernel_network(const Yolo26Model& model, Backend& backend,
                                             Precision precision = Precision::Fp32,
                                             LayoutChoice layout = LayoutChoice::Nchw);

}  // namespace lab
