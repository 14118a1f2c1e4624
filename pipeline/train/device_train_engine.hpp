// DeviceTrainEngine: a TrainEngine whose training iteration stays on the device. Master parameters (the
// checkpoint's conv.weight, bn.weight, bn.bias and plain conv weight/bias) float32 in one device arena, their
// gradients accumulated in another across accumulate() calls, the optimizer's state in a third
// (kernels/optim's OptimTensorList over them, Ultralytics' groups: conv weights 0, BatchNorm weights 1,
// biases 2). accumulate(): the persistent TrainingPass (forward, device loss, backward on ops built once per
// batch shape, reading the folded weights in place), then the BatchNorm chain rule on the device
// (batchnorm_fold_backward). step(): clip, SGD (Nesterov), AdamW or MuSGD, the fold of every conv into the
// weights its ops read (batchnorm_fold), gradients zeroed. Only the loss's scalars and the clipped norm come
// back per iteration. BatchNorm frozen, or (convs marked batch_statistics, GradientTape) normalising with
// the batch's statistics: then those convs are not folded (the fold copies conv.weight, bn.weight, bn.bias
// to where the tape reads them), d bn.weight / d bn.bias come straight from the BatchNorm backward, and the
// running statistics live on the device, moved by every forward and downloaded by read_parameters. Their
// BatchNorm runs in float32 at every precision. At Precision::Fp16 / Bf16 the convs' products run on 16-bit
// tensor cores (TrainingPass's precision; the fold writes the forward's 16-bit operands); master parameters,
// gradients, optimizer state and the loss stay float32. fp16 adds dynamic loss scaling (LossScaler): the
// loss's gradient scaled in the loss kernels, unscaled in the chain rule (before the clip), and the clip
// pass's norm says on the device whether the step is taken (the optimizer kernels' gate), then on the host,
// downloaded after the step's launches, whether the scale backs off.
// stage() copies the next batch's bytes on lane 8 (kCopyLane: past the pass's lanes 1 and 2 and the lanes an
// inference plan's head levels take) into the second of two device buffers, beside the current iteration:
// from the start of the latest accumulate(), whose conversion reads the first. Data-parallel (a
// Communicator): each rank's engine runs its share of the batch with the whole batch's loss
// (loss::DeviceLossBatch::sum_over_ranks); before the clip of a step (after the backward of the micro-batch
// the step follows; none during accumulation) the accumulated gradients are summed over the ranks in buckets
// of about 25 MB, the last layers' first, so that every rank clips, scales and steps identically.
#pragma once
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "kernels/nn/precision.hpp"
#include "kernels/optim/musgd_op.hpp"
#include "kernels/optim/optim_op.hpp"
#include "kernels/train/batchnorm_fold_op.hpp"
#include "pipeline/executor/kernel_backward.hpp"
#include "pipeline/train/train_engine.hpp"

namespace lab {
class Communicator;
}

namespace lab::train {

class DeviceTrainEngine : public TrainEngine {
 public:
  // `optimizer`: "SGD", "AdamW" or "MuSGD" (any letter case; UsageError otherwise). The batch shape hint
  // builds the pass the first accumulate() uses; another shape builds its own (the hint's is kept beside the
  // latest). `precision`: Fp32, Fp16 or Bf16 (UsageError for Tf32). `ranks`: this rank's communicator in
  // data-parallel training (its backend is `backend`), null for one rank.
  DeviceTrainEngine(Backend& backend, const Yolo26Model& model, const std::string& optimizer, int batch,
                    int height, int width, Precision precision = Precision::Fp32,
                    Communicator* ranks = nullptr);

  std::string describe() const override;
  BatchLoss accumulate(const TrainBatch& batch, const loss::LossConfig& config) override;
  void stage(const TrainBatch& next) override;
  ~DeviceTrainEngine() override;
  double step(const StepHyper& hyper) override;
  std::optional<LossScaleState> loss_scale() const override;
  std::vector<std::pair<std::string, double>> gradient_norms() const override;
  void read_parameters(Yolo26Model& model) const override;
  OptimizerState optimizer_state() const override;
  void load_optimizer_state(const OptimizerState& state) override;

  // Data-parallel ranks with batch-statistics BatchNorm (SyncBatchNorm): every pass, those built and those to
  // come, normalises with the statistics of every rank's images, summed over the engine's communicator
  // (GradientTape::synchronise_batch_statistics), so every rank's running statistics move alike. Each rank's
  // engine calls it once before its first accumulate() (lab train --devices --bn batch); without it each rank
  // normalises with its own slice's statistics. Nothing to do for one rank (no communicator).
  void synchronise_batch_statistics();

  // The accumulated gradients, downloaded, per checkpoint parameter in for_each_conv order (as
  // reference::parameter_gradients); data-parallel: this rank's until a step or gradient_norms() sums them.
  std::vector<ParameterGradient> gradients() const;
  // Data-parallel: the gradient arena's buckets as (first float, floats), in the order they are summed.
  const std::vector<std::pair<size_t, size_t>>& gradient_buckets() const { return buckets_; }

 private:
  struct Parameter {
    std::string name;
    std::vector<int64_t> shape;
    size_t offset = 0, count = 0;  // floats into the arenas
    int group = 0;
  };
  // A TrainingPass with the fold table of its ops, and the parameter version its weights were folded from.
  struct Pass {
    std::unique_ptr<TrainingPass> pass;
    std::unique_ptr<FoldConvTable> table;
    long long folded_version = -1;
  };
  using Shape = std::tuple<int, int, int>;

  Pass& pass_for(int batch, int height, int width);
  // A conv's entry of the checkpoint arenas (parameters, gradients, frozen statistics; no fold targets).
  FoldConv checkpoint_entry(const ConvSpec& conv) const;
  std::unique_ptr<FoldConvTable> fold_table(const TrainingPass& pass) const;
  float* arena(const DeviceBuffer& b, size_t offset) const { return b.as<float>() + offset; }
  std::vector<float> download(const DeviceBuffer& arena, const Parameter& p) const;
  // The optimizer's state arenas and their tensors' name suffixes (as HostTrainEngine names them).
  std::vector<std::pair<const DeviceBuffer*, std::string>> state_buffers() const;
  // The step of the engine's optimizer on the clipped gradients; `gate` set: skipped on the device when the
  // float there is not finite.
  void optimizer_step(const StepHyper& hyper, const float* gate);
  void sum_gradients_over_ranks() const;        // once after each accumulation: the buckets, all-reduced

  Backend& backend_;
  Yolo26Model model_;  // shapes and names; its values are the starting parameters
  std::string optimizer_;
  Precision precision_;
  std::optional<LossScaler> scaler_;  // fp16 only
  Shape hint_;
  std::vector<Parameter> parameters_;
  std::map<std::string, size_t> first_parameter_;  // conv name -> its first entry in parameters_
  DeviceBuffer params_, grads_, state0_, state1_, muon_update_, norms_, clip_out_;
  DeviceBuffer frozen_;  // running mean then var per conv with BatchNorm (moved by batch statistics)
  std::vector<MuonShape> muon_shapes_;           // per tensor of list_ (MuSGD)
  std::map<std::string, size_t> frozen_offset_;  // conv name -> its running mean (var follows)
  std::map<Shape, Pass> passes_;  // the hint's, built at construction, and the latest other shape's
  std::unique_ptr<FoldConvTable> norm_table_;  // one checkpoint entry per conv: the per-conv gradient norms
  std::optional<BatchStatisticsSync> sync_;
  // The batches' bytes on the device: pixels_[current_pixels_] is the latest accumulate()'s, the other the
  // staged batch's (staged_host_ / staged_bytes_ its host bytes, null when none is staged).
  static constexpr int kCopyLane = 8;
  DeviceBuffer pixels_[2];
  int current_pixels_ = 0;
  const uint8_t* staged_host_ = nullptr;
  size_t staged_bytes_ = 0;
  bool copy_lane_open_ = false;
  // Joins the copy lane; then the staged batch's bytes are on the device.
  void join_copy_lane();
  std::unique_ptr<OptimTensorList> list_;
  BatchnormFoldOp fold_;
  ClipGradNormOp clip_;
  SgdOp sgd_;
  AdamwOp adamw_;
  MusgdOp musgd_;
  long long version_ = 0;  // optimizer steps taken by this engine (the folds' parameter version)
  long long steps_ = 0;    // the optimizer's step count (loaded with its state)
  Communicator* ranks_;    // data-parallel: this rank's; null for one rank
  std::vector<std::pair<size_t, size_t>> buckets_;  // data-parallel: the gradient arena's, last layers first
  mutable bool gradients_summed_ = false;
};

}  // namespace lab::train
