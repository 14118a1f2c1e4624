// A training run's state, what `--resume` continues from (weights/last_state.safetensors): the trained
// model's and the EMA's tensors ("train/<name>", "ema/<name>", float32), the optimizer's
// ("optimizer/<name>"), and in the metadata where the run stands (the next epoch and batch, the last
// optimizer step's iteration, the epoch's loss sums so far, the best fitness, the EMA's updates, the time
// spent, results.csv so far). Written atomically.
#pragma once
#include <array>
#include <filesystem>
#include <string>

#include "pipeline/train/train_engine.hpp"

namespace lab::train {

struct RunPosition {
  int epoch = 0;                      // the epoch to run next (0-based)
  long long next_batch = 0;           // its first batch not yet trained on (0 unless interrupted mid-epoch)
  std::array<double, 3> loss_sums{};  // that epoch's summed box, cls, l1 over its batches so far
  long long last_opt_step = -1;       // the iteration of the last optimizer step
  double best_fitness = -1;           // -1: none yet
  int best_epoch = -1;                // 0-based
  long long ema_updates = 0;
  double seconds = 0;       // training time so far
  std::string results_csv;  // the file's content so far
};

struct TrainState {
  RunPosition position;
  Yolo26Model model, ema;  // parameters as saved (the caller's structure, tensors read from the file)
  OptimizerState optimizer;
};

void save_train_state(const std::filesystem::path& path, const RunPosition& position,
                      const Yolo26Model& model, const Yolo26Model& ema, const OptimizerState& optimizer);

// Reads a state saved for a model of `structure`'s shape (the same checkpoint, classes re-initialised the
// same way); UsageError naming the file for a missing tensor, a size that differs or bad metadata.
TrainState load_train_state(const std::filesystem::path& path, const Yolo26Model& structure);

}  // namespace lab::train
