// What `lab train`'s loop (pipeline/train/trainer) drives each iteration, and what it is fed: a batch in,
// its loss out, gradients accumulated over the nominal batch, then one optimizer step. Implementations:
// HostTrainEngine (the kernel backward or the float64 reference backward, gradients and the optimizer on the
// host: every backend, and the reference for the other) and DeviceTrainEngine (parameters, gradients and
// optimizer state resident on the device, kernels/optim's steps).
#pragma once
#include <array>
#include <cstdint>
#include <filesystem>
#include <map>
#include <memory_resource>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "pipeline/loss/loss_types.hpp"
#include "pipeline/model/yolo26_model.hpp"
#include "pipeline/train/loss_scaler.hpp"

namespace lab::train {

// One batch as the loader hands it over: letterboxed (and augmented) images and their boxes in the input.
// The images come one of two ways: `pixels`, the loader's RGB bytes (the network's input is pixels / 255 in
// planes; DeviceTrainEngine uploads the bytes, a quarter of the floats' size, and converts them on the
// device), or `images`, float planes of any values (tests); the other is empty. The loader's pixels live in
// its staging memory (TrainLoader::stage_batches_in: page-locked on cuda, so their upload is DMA); a copy of
// the batch, like a default one, holds ordinary memory.
struct TrainBatch {
  int batch = 0, height = 0, width = 0;
  std::pmr::vector<uint8_t> pixels;                    // [batch, height, width, 3] RGB bytes
  std::vector<float> images;                           // [batch, 3, height, width]
  std::vector<std::vector<loss::GtBox>> ground_truth;  // per image: class and xyxy pixels in the input
  std::vector<std::filesystem::path> files;            // per image (a mosaic: its first tile's)

  // The float planes [batch, 3, height, width]: `images`, or `pixels` / 255 by pipeline/image's byte table.
  std::vector<float> planes() const;
  // Empty when exactly one of pixels and images holds batch x height x width images, else why not.
  std::string size_problem() const;
};

// The loss of one batch: per-image components after gains (as Ultralytics prints them) and the total that
// is differentiated (batch * (w_o2m * one2many.sum() + w_o2o * one2one.sum())).
struct BatchLoss {
  loss::HeadLoss one2many, one2one;
  loss::HeadWeights weights;
  double total = 0;
};

// Ultralytics' parameter groups: 0 conv weights (with decay), 1 BatchNorm weights, 2 biases (no decay).
constexpr int kParameterGroups = 3;

// The settings of one optimizer step as the schedule sets them (warm-up moves lr and momentum).
struct StepHyper {
  std::array<double, kParameterGroups> lr{};
  double momentum = 0.937;     // SGD momentum, AdamW beta1
  double weight_decay = 5e-4;  // group 0 only, already scaled to the nominal batch
  double max_norm = 10;        // gradient norm clipping
};

// An optimizer's state for `--resume`: its name, the steps taken and its per-parameter tensors by name
// ("<parameter>.momentum", "<parameter>.exp_avg", "<parameter>.exp_avg_sq"), and fp16 training's loss scaler.
struct OptimizerState {
  std::string name;
  long long steps = 0;
  std::map<std::string, std::vector<float>> tensors;
  std::optional<LossScaleState> loss_scale;  // fp16 only
};

class TrainEngine {
 public:
  virtual ~TrainEngine() = default;
  // "kernel backward (float32) on cuda (NVIDIA H200), AdamW on the device", for the run's header line.
  virtual std::string describe() const = 0;
  // Forward, loss (config.epoch/epochs set the head weights) and backward of `batch`; its gradients are added
  // to those accumulated since the last step.
  virtual BatchLoss accumulate(const TrainBatch& batch, const loss::LossConfig& config) = 0;
  // Starts moving `next`'s images to the device while the work already issued runs (DeviceTrainEngine; a
  // no-op elsewhere). `next` must stay alive and unchanged until the accumulate() that takes it, which must
  // be the next accumulate(); another batch there is moved itself, as without stage().
  virtual void stage(const TrainBatch& /*next*/) {}
  // Clips the accumulated gradient at hyper.max_norm, takes one step of the engine's optimizer and zeroes the
  // gradients. Returns the gradient's L2 norm before clipping. With a loss scaler (fp16) the step is skipped
  // where that norm is not finite.
  virtual double step(const StepHyper& hyper) = 0;
  // fp16 training's loss scaler after the last step; nullopt without one.
  virtual std::optional<LossScaleState> loss_scale() const { return std::nullopt; }
  // The accumulated gradient's L2 norm per conv module (ConvSpec::name), in network order; for the Train
  // panel. Valid between accumulate() and step().
  virtual std::vector<std::pair<std::string, double>> gradient_norms() const = 0;
  // The current parameters written into `model` (checkpoint parameters, then refolded): EMA, validation and
  // checkpoints read them.
  virtual void read_parameters(Yolo26Model& model) const = 0;
  virtual OptimizerState optimizer_state() const = 0;
  // UsageError when the state is another optimizer's or its tensors do not match the parameters.
  virtual void load_optimizer_state(const OptimizerState& state) = 0;
};

}  // namespace lab::train
