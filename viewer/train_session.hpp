// The Train panel's training run, apart from the GUI: `lab train`'s Trainer on a worker thread, driven
// through its hooks (each step's loss components, learning rate per group, gradient norm and per-layer
// gradient norms are recorded; pause waits inside the step hook; stop makes should_stop true), and the
// assignment view (pipeline/train/assignment_view) of the validation image with the most boxes from the
// current weights, at the first iteration, every N iterations and on request (while paused too, and after the
// run from its last weights). The GUI thread only calls the members below, none of which waits for the worker
// (the destructor excepted), and copies progress() when version() changed.
#pragma once
#include <array>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "nvrtc_runtime/runtime_context.hpp"
#include "pipeline/train/assignment_view.hpp"
#include "pipeline/train/train_engine.hpp"
#include "pipeline/train/trainer.hpp"

namespace lab::viewer {

// What the panel asks for: the dataset, the model and the settings `lab train` would take.
struct TrainRequest {
  std::string data_yaml, model;  // model empty: the default yolo26n (model_locator)
  int epochs = 3, batch = 4, imgsz = 160;
  int nbs = 64;                 // nominal batch: an optimizer step every max(round(nbs / batch), 1) batches
  std::string backend = "cpu";  // cpu, cuda, reference
  int assignment_every = 10;    // iterations between refreshes of the assignment view
  std::string project;          // runs/train/<name>/ goes under it; empty: the Trainer's default
};

// One iteration's numbers, as the Trainer's step hook hands them over.
struct TrainStepRecord {
  long long iteration = 0;
  int epoch = 0;
  train::BatchLoss loss;
  std::array<double, train::kParameterGroups> lr{};
  bool stepped = false;      // an optimizer step followed the batch
  double gradient_norm = 0;  // when stepped: before clipping
};

// The assignment view with the image it was made on (the letterboxed input as RGB bytes).
struct AssignmentSnapshot {
  long long serial = 0;  // 1, 2, ... per session: a new snapshot has a new serial
  std::string weights;   // whose: "after iteration 10", "the last run's final weights", "<model path>"
  std::string image_file;
  std::vector<uint8_t> rgb;  // [height, width, 3]
  train::AssignmentView view;
};

enum class TrainPhase { idle, starting, running, paused, finished, stopped, failed };
const char* train_phase_name(TrainPhase phase);

struct TrainProgress {
  TrainPhase phase = TrainPhase::idle;
  bool pause_requested = false, stop_requested = false;
  bool assignment_pending = false;  // asked for and not made yet
  std::string failure;              // the one-line error of a failed run
  std::vector<std::string> log;     // the Trainer's description and log lines, the last few
  std::string folder;               // the run folder (weights, results.csv)
  int epochs = 0;
  std::vector<TrainStepRecord> steps;
  std::vector<train::EpochReport> epoch_reports;
  std::vector<std::pair<std::string, double>> module_norms;  // of the latest step
  std::shared_ptr<const AssignmentSnapshot> assignment;
  std::string assignment_failure;
  long long version = 0;  // changes whenever anything above does
};

struct TrainSessionShared;  // what the GUI and the worker share (train_session.cpp)

class TrainSession {
 public:
  explicit TrainSession(RuntimeContext context);
  ~TrainSession();  // stops a run and waits for the worker
  TrainSession(const TrainSession&) = delete;
  TrainSession& operator=(const TrainSession&) = delete;

  // Starts a run on the worker thread; UsageError while one is active. Whatever else goes wrong (a bad YAML,
  // model or setting) ends the run as `failed` with its one-line message.
  void start(const TrainRequest& request);
  void pause();  // the run waits after its current step
  void resume();
  void stop();  // the run ends after its current step
  // The assignment view from the current weights: during a run made by the worker after its current step
  // (at once while paused); between runs on the worker thread from the last run's weights (the same dataset
  // and imgsz), else from `request`'s model. UsageError when `request` names no dataset.
  void request_assignment(const TrainRequest& request);

  TrainProgress progress() const;
  long long version() const;

 private:
  RuntimeContext context_;
  std::shared_ptr<TrainSessionShared> shared_;
  std::thread worker_;
};

}  // namespace lab::viewer
