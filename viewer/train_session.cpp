// TrainSession: the worker thread, the state it shares with the GUI under one mutex, and the assignment
// snapshots (the dataset's first labelled validation image, letterboxed as the loss sees it).
#include "viewer/train_session.hpp"

#include <algorithm>
#include <condition_variable>
#include <functional>
#include <mutex>

#include "nvrtc_runtime/errors.hpp"
#include "pipeline/checkpoint/checkpoint.hpp"
#include "pipeline/dataset/yolo_dataset.hpp"
#include "pipeline/detect/model_locator.hpp"
#include "pipeline/loss/training_image.hpp"
#include "pipeline/train/trainer.hpp"

namespace lab::viewer {

namespace {

bool is_active(TrainPhase phase) {
  return phase == TrainPhase::starting || phase == TrainPhase::running || phase == TrainPhase::paused;
}

// The image the assignment view shows: the validation image with the most boxes (the first of them; from
// the training split when the dataset has no validation split), letterboxed to imgsz x imgsz with its labels.
struct AssignmentImage {
  std::string file;
  loss::TrainingImage image;
};

AssignmentImage assignment_image(const std::string& data_yaml, int imgsz) {
  const dataset::DataConfig data = dataset::read_data_yaml(data_yaml);
  const dataset::Split split = dataset::read_split(data, data.val.empty() ? "train" : "val");
  const dataset::Sample* best = nullptr;
  for (const dataset::Sample& sample : split.samples)
    if (!best || sample.labels.size() > best->labels.size()) best = &sample;
  if (!best || best->labels.empty())
    throw UsageError(data_yaml + ": no image with labels to show the assignment on");
  return {best->image.string(), loss::load_training_image(best->image, best->label, imgsz, false,
                                                          static_cast<int>(data.names.size()))};
}

std::vector<uint8_t> rgb_bytes(const loss::TrainingImage& image) {
  const size_t plane = size_t(image.height) * image.width;
  std::vector<uint8_t> rgb(plane * 3);
  for (size_t i = 0; i < plane; ++i)
    for (size_t c = 0; c < 3; ++c)
      rgb[i * 3 + c] = static_cast<uint8_t>(std::clamp(image.input[c * plane + i], 0.0f, 1.0f) * 255 + 0.5f);
  return rgb;
}

}  // namespace

const char* train_phase_name(TrainPhase phase) {
  switch (phase) {
    case TrainPhase::idle:
      return "idle";
    case TrainPhase::starting:
      return "starting";
    case TrainPhase::running:
      return "running";
    case TrainPhase::paused:
      return "paused";
    case TrainPhase::finished:
      return "finished";
    case TrainPhase::stopped:
      return "stopped";
    case TrainPhase::failed:
      return "failed";
  }
  return "?";
}

// The state the GUI and the worker share; every member behind `mutex`.
struct TrainSessionShared {
  std::mutex mutex;
  std::condition_variable wake;  // resume, stop, assignment requests
  TrainProgress progress;
  long long serial = 0;
  std::shared_ptr<const Yolo26Model> last_model;  // the weights of the last run's last step
  TrainRequest last_request;                      // of the last run

  void changed() { ++progress.version; }
};

TrainSession::TrainSession(RuntimeContext context)
    : context_(std::move(context)), shared_(std::make_shared<TrainSessionShared>()) {}

TrainSession::~TrainSession() {
  {
    std::lock_guard lock(shared_->mutex);
    shared_->progress.stop_requested = true;
    shared_->progress.pause_requested = false;
  }
  shared_->wake.notify_all();
  if (worker_.joinable()) worker_.join();
}

namespace {

// Makes assignment snapshots for one run (or one request): the image, the backend of its kernels.
class AssignmentMaker {
 public:
  AssignmentMaker(const TrainRequest& request, const RuntimeContext& context)
      : image_(assignment_image(request.data_yaml, request.imgsz)),
        backend_(make_backend(request.backend == "reference" ? "cpu" : request.backend, context)) {}

  std::shared_ptr<const AssignmentSnapshot> make(const Yolo26Model& model, const std::string& weights,
                                                 long long serial) const {
    auto snapshot = std::make_shared<AssignmentSnapshot>();
    snapshot->serial = serial;
    snapshot->weights = weights;
    snapshot->image_file = image_.file;
    snapshot->rgb = rgb_bytes(image_.image);
    snapshot->view =
        train::assignment_view(*backend_, model, image_.image.input, image_.image.height, image_.image.width,
                               image_.image.ground_truth, loss::LossConfig{});
    return snapshot;
  }

 private:
  AssignmentImage image_;
  std::unique_ptr<Backend> backend_;
};

}  // namespace

namespace {

using Snapshot = std::shared_ptr<const AssignmentSnapshot>;

// Makes a snapshot outside the lock (`make` gets its serial) and publishes it, or its failure.
void publish_assignment(TrainSessionShared& sh, const std::function<Snapshot(long long)>& make) {
  long long serial = 0;
  {
    std::lock_guard lock(sh.mutex);
    serial = ++sh.serial;
  }
  Snapshot snapshot;
  std::string failure;
  try {
    snapshot = make(serial);
  } catch (const std::exception& e) {
    failure = e.what();
  }
  std::lock_guard lock(sh.mutex);
  if (snapshot) sh.progress.assignment = std::move(snapshot);
  sh.progress.assignment_failure = failure;
  sh.progress.assignment_pending = false;
  sh.changed();
}

}  // namespace

namespace {

// Inside the step hook: waits while a pause is asked for, making the assignments asked for meanwhile.
void wait_while_paused(TrainSessionShared& sh, const std::function<Snapshot(long long)>& make) {
  std::unique_lock lock(sh.mutex);
  if (!sh.progress.pause_requested || sh.progress.stop_requested) return;
  sh.progress.phase = TrainPhase::paused;
  sh.changed();
  while (sh.progress.pause_requested && !sh.progress.stop_requested) {
    if (sh.progress.assignment_pending) {
      lock.unlock();
      publish_assignment(sh, make);
      lock.lock();
      continue;
    }
    sh.wake.wait(lock);
  }
  sh.progress.phase = TrainPhase::running;
  sh.changed();
}

// Appends a line to the run's log (the Trainer's description, warnings), keeping the last kLogLines.
constexpr size_t kLogLines = 12;
void add_log(TrainProgress& p, const std::string& line) {
  p.log.push_back(line);
  if (p.log.size() > kLogLines) p.log.erase(p.log.begin());
}

train::TrainOptions train_options(const TrainRequest& request) {
  train::TrainOptions options;
  options.data = request.data_yaml;
  options.model = locate_model(default_model_search(request.model)).path.string();
  options.epochs = request.epochs, options.batch = request.batch, options.imgsz = request.imgsz;
  options.nbs = request.nbs;
  options.backend = request.backend;
  options.engine = request.backend == "cuda" ? "device" : "host";  // as lab train's --engine auto
  if (!request.project.empty()) options.project = request.project;
  return options;
}

// The worker of one run: the Trainer with hooks that record each iteration, make the assignment snapshots
// that are due, pause and stop.
void train_worker(std::shared_ptr<TrainSessionShared> shared, TrainRequest request, RuntimeContext context) {
  TrainSessionShared& sh = *shared;
  std::shared_ptr<const Yolo26Model> last;
  std::string failure;
  try {
    const AssignmentMaker maker(request, context);
    std::unique_ptr<train::Trainer> trainer;
    const auto make_at = [&](long long iteration) {
      return [&, iteration](long long serial) {
        return maker.make(trainer->model(), "after iteration " + std::to_string(iteration + 1), serial);
      };
    };
    train::TrainHooks hooks;
    hooks.log = [&](const std::string& line) {
      std::lock_guard lock(sh.mutex);
      add_log(sh.progress, line);
      sh.changed();
    };
    hooks.on_step = [&](const train::StepReport& step) {
      bool due = false;
      {
        std::lock_guard lock(sh.mutex);
        TrainProgress& p = sh.progress;
        p.steps.push_back({step.iteration, step.epoch, step.loss, step.lr, step.stepped, step.grad_norm});
        if (step.stepped) p.module_norms = step.module_grad_norms;
        due = p.assignment_pending || p.steps.size() == 1 ||
              p.steps.size() % size_t(std::max(request.assignment_every, 1)) == 0;
        p.assignment_pending = due;
        sh.changed();
      }
      if (due) publish_assignment(sh, make_at(step.iteration));
      wait_while_paused(sh, make_at(step.iteration));
    };
    hooks.on_epoch = [&](const train::EpochReport& epoch) {
      std::lock_guard lock(sh.mutex);
      sh.progress.epoch_reports.push_back(epoch);
      sh.changed();
    };
    hooks.should_stop = [&] {
      std::lock_guard lock(sh.mutex);
      return sh.progress.stop_requested;
    };
    trainer = std::make_unique<train::Trainer>(train_options(request), std::nullopt, context, hooks);
    {
      std::lock_guard lock(sh.mutex);
      for (const std::string& line : trainer->description()) add_log(sh.progress, line);
      sh.progress.folder = trainer->folder().string();
      sh.progress.phase = TrainPhase::running;
      sh.changed();
    }
    trainer->run();
    last = std::make_shared<const Yolo26Model>(trainer->model());
    bool pending = false;
    long long iteration = 0;
    {
      std::lock_guard lock(sh.mutex);
      pending = sh.progress.assignment_pending;
      if (!sh.progress.steps.empty()) iteration = sh.progress.steps.back().iteration;
    }
    if (pending) publish_assignment(sh, make_at(iteration));  // asked for with the last iteration
  } catch (const std::exception& e) {
    failure = e.what();
  }
  // One update, so that the run is active until everything of it is settled (start() waits for that).
  std::lock_guard lock(sh.mutex);
  TrainProgress& p = sh.progress;
  p.phase = !failure.empty()   ? TrainPhase::failed
            : p.stop_requested ? TrainPhase::stopped
                               : TrainPhase::finished;
  p.failure = failure;
  p.assignment_pending = false;  // one asked for as a run fails: made between runs when asked again
  p.pause_requested = false;
  if (last) sh.last_model = std::move(last), sh.last_request = request;
  sh.changed();
}

// The worker of an assignment asked for between runs: from the last run's weights, else the request's model.
void assignment_worker(std::shared_ptr<TrainSessionShared> shared, TrainRequest request,
                       RuntimeContext context, std::shared_ptr<const Yolo26Model> model) {
  publish_assignment(*shared, [&](long long serial) {
    const AssignmentMaker maker(request, context);
    if (model) return maker.make(*model, "the last run's final weights", serial);
    const ModelLocation location = locate_model(default_model_search(request.model));
    return maker.make(Yolo26Model::from_checkpoint(load_checkpoint(location.path)), location.path.string(),
                      serial);
  });
}

}  // namespace

void TrainSession::start(const TrainRequest& request) {
  {
    std::lock_guard lock(shared_->mutex);
    TrainProgress& p = shared_->progress;
    if (is_active(p.phase)) throw UsageError("a training run is active: stop it first");
    if (p.assignment_pending) throw UsageError("the assignment view is being made: start when it is shown");
    const std::shared_ptr<const AssignmentSnapshot> assignment = p.assignment;
    p = TrainProgress{};
    p.version = shared_->progress.version;
    p.phase = TrainPhase::starting;
    p.epochs = request.epochs;
    p.assignment = assignment;  // the last one stays until the run makes its first
    shared_->changed();
  }
  if (worker_.joinable()) worker_.join();  // a finished worker: returns at once
  worker_ = std::thread(train_worker, shared_, request, context_);
}

void TrainSession::pause() {
  std::lock_guard lock(shared_->mutex);
  if (!is_active(shared_->progress.phase)) return;
  shared_->progress.pause_requested = true;
  shared_->changed();
}

void TrainSession::resume() {
  {
    std::lock_guard lock(shared_->mutex);
    shared_->progress.pause_requested = false;
    shared_->changed();
  }
  shared_->wake.notify_all();
}

void TrainSession::stop() {
  {
    std::lock_guard lock(shared_->mutex);
    if (!is_active(shared_->progress.phase)) return;
    shared_->progress.stop_requested = true;
    shared_->changed();
  }
  shared_->wake.notify_all();
}

void TrainSession::request_assignment(const TrainRequest& request) {
  std::shared_ptr<const Yolo26Model> model;
  {
    if (request.data_yaml.empty())
      throw UsageError("choose a dataset YAML first: the view shows one of its images");
    std::lock_guard lock(shared_->mutex);
    TrainProgress& p = shared_->progress;
    if (p.assignment_pending) return;
    p.assignment_pending = true;
    shared_->changed();
    if (is_active(p.phase)) {
      shared_->wake.notify_all();
      return;
    }
    if (shared_->last_model && shared_->last_request.data_yaml == request.data_yaml &&
        shared_->last_request.imgsz == request.imgsz)
      model = shared_->last_model;
  }
  if (worker_.joinable()) worker_.join();
  worker_ = std::thread(assignment_worker, shared_, request, context_, std::move(model));
}

TrainProgress TrainSession::progress() const {
  std::lock_guard lock(shared_->mutex);
  return shared_->progress;
}

long long TrainSession::version() const {
  std::lock_guard lock(shared_->mutex);
  return shared_->progress.version;
}

}  // namespace lab::viewer
