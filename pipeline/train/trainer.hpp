// `lab train`'s loop, as Ultralytics' BaseTrainer runs it: per epoch a fresh shuffle (TrainLoader), per batch
// the forward, loss and backward on the engine (gradients summed), an optimizer step every `accumulate`
// batches (the nominal batch; the warm-up's schedule moves it, the lr and the momentum), the EMA updated
// after each step, the loss's head weights by epoch; after each epoch the EMA model validated
// (pipeline/val), fitness 0.1 * mAP50 + 0.9 * mAP50-95, `best` on improvement, `last` every epoch,
// results.csv, early stop after `patience` epochs without improvement. Hooks report each iteration and epoch
// (the CLI's progress bar and the viewer's Train panel) and can stop the run after the current iteration;
// the state (and weights/last) is then saved so that `--resume` continues at the next batch.
// Data-parallel (a TrainRank per rank, train_on_devices): every rank runs its own Trainer on its own backend
// and loader shard with the total batch's schedule; the device engine sums the loss and the gradients over
// the ranks. Rank 0 alone writes the run folder, validates, keeps the EMA and calls the hooks; its stop
// decisions (the hook, early stopping) are broadcast so that every rank leaves at the same iteration.
#pragma once
#include <array>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "nvrtc_runtime/backend.hpp"
#include "nvrtc_runtime/runtime_context.hpp"
#include "pipeline/checkpoint/checkpoint.hpp"
#include "pipeline/checkpoint/torch_checkpoint_writer.hpp"
#include "pipeline/dataset/yolo_dataset.hpp"
#include "pipeline/metrics/ultralytics_metrics.hpp"
#include "pipeline/train/lr_schedule.hpp"
#include "pipeline/train/model_ema.hpp"
#include "pipeline/train/train_engine.hpp"
#include "pipeline/train/train_options.hpp"
#include "pipeline/train/train_state.hpp"

namespace lab {
class Communicator;
}

namespace lab::train {

class TrainLoader;

// One rank of a data-parallel run: its communicator and the backend its device engine runs on. The default
// (no communicator): the only rank, on a backend of its own.
struct TrainRank {
  Communicator* communicator = nullptr;
  Backend* backend = nullptr;
};

// One iteration, told as it finishes.
struct StepReport {
  int epoch = 0, epochs = 0;  // 0-based epoch
  long long batch_index = 0, batches = 0;
  long long iteration = 0;  // ni = batch_index + batches * epoch
  int images = 0;
  BatchLoss loss;                     // this batch's
  std::array<double, 3> mean_loss{};  // box, cls, l1: the epoch's running mean per image (head-weighted)
  std::array<double, kParameterGroups> lr{};
  double momentum = 0;
  bool stepped = false;                                           // an optimizer step followed this batch
  double grad_norm = 0;                                           // when stepped: before clipping
  std::optional<LossScaleState> loss_scale;                       // when stepped, fp16: the scaler after it
  std::vector<std::pair<std::string, double>> module_grad_norms;  // when stepped: per conv module
};

// One finished epoch.
struct EpochReport {
  int epoch = 0, epochs = 0;  // 0-based
  double seconds = 0;         // of the run so far
  std::array<double, 3> train_loss{};
  bool validated = false;
  metrics::DetectionMetrics metrics;  // the EMA model on the val split (the last validation's)
  double fitness = 0;
  bool best = false;  // fitness improved: weights/best written
  std::array<double, kParameterGroups> lr{};
};

struct TrainHooks {
  std::function<void(const std::string& line)> log;  // what the run does, warnings
  std::function<void(const StepReport&)> on_step;
  std::function<void(const EpochReport&)> on_epoch;
  std::function<bool()> should_stop;  // asked after each iteration
};

struct TrainSummary {
  std::filesystem::path folder;
  int epochs_done = 0;  // finished epochs
  bool stopped_early = false, interrupted = false;
  double best_fitness = -1;
  int best_epoch = -1;
};

class Trainer {
 public:
  // Reads the dataset and the model, picks the optimizer and builds the engine, then creates the run folder
  // (PROJECT/NAME, incremented) with args.yaml; with `resume` (a run folder or state file, empty: the newest
  // under the project), the run's own args.yaml and state instead. A bad dataset or model is a UsageError
  // before anything is written. `rank`: this Trainer's rank of a data-parallel run (options.batch stays the
  // total; UsageError when it does not divide over the ranks); ranks other than 0 write nothing.
  Trainer(TrainOptions options, std::optional<std::string> resume, const RuntimeContext& context,
          TrainHooks hooks, TrainRank rank = {});
  ~Trainer();

  // "train: 64 images ..., optimizer AdamW(lr=0.001667, momentum=0.9) ..." lines for the run's header.
  const std::vector<std::string>& description() const { return description_; }
  const std::filesystem::path& folder() const { return folder_; }
  const TrainOptions& options() const { return options_; }
  // The trained parameters as of the last optimizer step (read from the engine for the EMA after each step;
  // valid in on_step): the viewer's Train panel draws the assignment of these weights.
  const Yolo26Model& model() const { return model_; }

  TrainSummary run();

 private:
  bool train_epoch(int epoch);  // false when stopped by the hook
  void finish_epoch(int epoch);
  void save_state();
  void save_weights(const EpochReport& report);
  // The metrics weights/last and best record: of the last validation, after epoch `epoch` (0-based).
  TrainingRecord training_record(int epoch) const;  // weights/last (and best): the EMA model; results.png
  void log(const std::string& line) const;
  bool lead() const;                    // rank 0 (or the only rank): writes, validates, keeps the EMA
  bool agreed(bool rank0_value) const;  // rank 0's value on every rank

  TrainOptions options_;
  TrainHooks hooks_;
  std::unique_ptr<Checkpoint> base_;  // the checkpoint trained from: what weights/last and best extend
  RuntimeContext context_;
  std::filesystem::path folder_;
  std::vector<std::string> description_;
  std::vector<std::string> names_;
  dataset::Split val_split_;
  std::unique_ptr<TrainLoader> loader_;
  TrainRank rank_;
  std::unique_ptr<Backend>
      device_;  // the device engine's own backend (declared first: it outlives the engine)
  std::unique_ptr<TrainEngine> engine_;
  std::optional<ModelEma> ema_;
  std::optional<LrSchedule> schedule_;
  Yolo26Model model_;  // the engine's parameters as last read (for the EMA)
  double weight_decay_ = 0;
  RunPosition position_;
  std::array<double, kParameterGroups> last_lr_{};
  metrics::DetectionMetrics metrics_;
  bool stopped_early_ = false;
};

}  // namespace lab::train
