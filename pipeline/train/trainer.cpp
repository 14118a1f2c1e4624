// Trainer (trainer.hpp).
#include "pipeline/train/trainer.hpp"

#include <chrono>
#include <sstream>

#include "kernels/optim/optimizer_choice.hpp"
#include "nvrtc_runtime/errors.hpp"
#include "nvrtc_runtime/printable_text.hpp"
#include "pipeline/distributed/communicator.hpp"
#include "pipeline/atomic_file.hpp"
#include "pipeline/checkpoint/checkpoint.hpp"
#include "pipeline/dataset/data_yaml.hpp"
#include "pipeline/detect/model_locator.hpp"
#include "pipeline/model/batchnorm_batch.hpp"
#include "pipeline/train/class_reinit.hpp"
#include "pipeline/train/device_train_engine.hpp"
#include "pipeline/train/host_train_engine.hpp"
#include "pipeline/train/model_checkpoint.hpp"
#include "pipeline/train/results_csv.hpp"
#include "pipeline/train/results_plot.hpp"
#include "pipeline/train/run_folder.hpp"
#include "pipeline/train/train_loader.hpp"
#include "pipeline/val/validator.hpp"

namespace lab::train {
namespace {

using Clock = std::chrono::steady_clock;

std::string fixed(double v) {
  std::ostringstream s;
  s << v;
  return s.str();
}

// Ultralytics' fitness of a validation: 0.1 * mAP50 + 0.9 * mAP50-95.
double fitness_of(const metrics::DetectionMetrics& m) {
  return 0.1 * m.map50 + 0.9 * m.map50_95;
}

}  // namespace

Trainer::Trainer(TrainOptions options, std::optional<std::string> resume, const RuntimeContext& context,
                 TrainHooks hooks, TrainRank rank)
    : options_(std::move(options)), hooks_(std::move(hooks)), context_(context), rank_(rank) {
  std::filesystem::path state_file;
  if (resume) {
    state_file = resume_state_path(*resume, options_.project);
    folder_ = state_file.parent_path().parent_path();
    options_ = read_args_yaml(folder_ / "args.yaml");
  }
  check_train_options(options_);
  const int ranks = rank_.communicator ? rank_.communicator->size() : 1;
  if (options_.batch % ranks != 0)
    throw UsageError("--batch " + std::to_string(options_.batch) + ": the total batch does not divide over " +
                     std::to_string(ranks) + " ranks");
  if (ranks > 1 && options_.engine != "device")
    throw UsageError("--engine " + options_.engine + ": data-parallel training runs the device engine");

  const dataset::DataConfig data = dataset::read_data_yaml(options_.data);
  dataset::Split train_split = dataset::read_split(data, "train");
  val_split_ = dataset::read_split(data, "val");
  if (lead())  // every rank reads the same splits: rank 0 tells their warnings
    for (const dataset::Split* split : {&train_split, &val_split_})
      for (const std::string& warning : split->report.warnings) log("warning: " + warning);
  for (const auto& [split, name] : {std::pair{&train_split, "train"}, std::pair{&val_split_, "val"}})
    if (split->samples.empty())
      throw UsageError(printable_path(options_.data) + ": no usable image in split '" + name + "' (" +
                       split->report.summary() + ")");
  names_ = data.names;

  const ModelLocation location = locate_model(default_model_search(options_.model));
  options_.model = location.path.string();  // what args.yaml records and a resumed run reloads
  base_ = std::make_unique<Checkpoint>(load_checkpoint(location.path));
  Yolo26Model model = Yolo26Model::from_checkpoint(*base_);
  if (model.layers.empty() || model.layers.back().detect.one2many.empty())
    throw UsageError(printable_path(location.path) +
                     ": no one-to-many head (an inference export); train from a checkpoint that has it");
  const int checkpoint_classes = model.nc;
  adopt_classes(model, data.names, options_.seed);

  const int rank_batch = options_.batch / ranks;
  loader_ = std::make_unique<TrainLoader>(
      train_split, options_.imgsz, rank_batch, options_.augment, options_.workers, options_.seed,
      RankShard{rank_.communicator ? rank_.communicator->rank() : 0, ranks});
  // An image that does not decode is found when its batch is made: skipped, with a warning naming it.
  loader_->on_warning([this](const std::string& warning) { log("warning: " + warning); });
  if (Communicator* ranks = rank_.communicator; ranks && ranks->size() > 1)
    loader_->pass_over_together([ranks](bool empty_here) {
      double empty = empty_here;
      ranks->all_reduce_sum_host(&empty, 1);
      return empty > 0;
    });
  const long long batches = (long long)loader_->batches_per_epoch();
  const OptimizerChoice choice =
      choose_optimizer(options_.optimizer, options_.lr0, options_.momentum,
                       auto_rule_iterations((long long)train_split.samples.size(), options_.batch,
                                            options_.nbs, options_.epochs),
                       model.nc);
  ScheduleSettings schedule;
  schedule.epochs = options_.epochs, schedule.batches_per_epoch = batches;
  schedule.batch = options_.batch, schedule.nbs = options_.nbs;
  schedule.lr0 = choice.lr, schedule.lrf = options_.lrf, schedule.momentum = choice.momentum;
  schedule.warmup_epochs = options_.warmup_epochs, schedule.warmup_momentum = options_.warmup_momentum;
  schedule.warmup_bias_lr = choice.zero_warmup_bias_lr ? 0.0 : options_.warmup_bias_lr;
  schedule.warmup_momentum_applies = choice.name != "AdamW";
  schedule_.emplace(schedule);
  weight_decay_ = scaled_weight_decay(options_.weight_decay, options_.batch, options_.nbs);

  Yolo26Model ema_start = model;
  OptimizerState optimizer_state;
  if (resume) {
    TrainState state = load_train_state(state_file, model);
    model = std::move(state.model), ema_start = std::move(state.ema);
    position_ = std::move(state.position);
    if (position_.epoch >= options_.epochs)
      throw UsageError("--resume " + printable_path(folder_) + ": the run finished its " +
                       std::to_string(options_.epochs) + " epochs; nothing to resume");
    optimizer_state = std::move(state.optimizer);
  }
  Yolo26Model engine_model = model;  // the engine's forward in train mode; validation's EMA in eval mode
  set_batchnorm_mode(engine_model, batchnorm_mode(options_.bn));
  if (options_.engine == "device") {
    if (!rank_.backend) device_ = make_backend(options_.backend, context_);
    Backend& backend = rank_.backend ? *rank_.backend : *device_;
    // The batches' pixels in the backend's staging memory: their upload each iteration is then DMA.
    loader_->stage_batches_in([&backend](size_t bytes) { return backend.alloc_host(bytes); });
    auto device = std::make_unique<DeviceTrainEngine>(backend, engine_model, choice.name, rank_batch,
                                                      options_.imgsz, options_.imgsz,
                                                      *parse_precision(options_.precision), rank_.communicator);
    if (options_.bn == "batch") device->synchronise_batch_statistics();  // SyncBatchNorm over the ranks
    engine_ = std::move(device);
  } else {
    engine_ = std::make_unique<HostTrainEngine>(std::move(engine_model), options_.backend, context_,
                                                choice.name);
  }
  if (resume) engine_->load_optimizer_state(optimizer_state);
  ema_.emplace(std::move(ema_start), position_.ema_updates);
  model_ = std::move(model);

  if (!resume && lead()) {
    folder_ = make_run_folder(options_.project, options_.name, options_.exist_ok);
    write_file_atomically(folder_ / "args.yaml", args_yaml(options_));
  }
  description_ = {
      "model " + location.path.string() + " (" + location.origin + ")" +
          (checkpoint_classes != model_.nc
               ? ", class branches re-initialised for " + std::to_string(model_.nc) +
                     " classes (the checkpoint has " + std::to_string(checkpoint_classes) + ")"
               : ""),
      "train: " + train_split.report.summary() + "; val: " + val_split_.report.summary(),
      "optimizer: " + choice.name + "(lr=" + fixed(choice.lr) + ", momentum=" + fixed(choice.momentum) +
          ") with parameter groups weight(decay=" + fixed(weight_decay_) + "), bn(decay=0), bias(decay=0); " +
          std::to_string(batches) + " batches of " + std::to_string(options_.batch) +
          " an epoch, nominal batch " + std::to_string(options_.nbs) + " (a step every " +
          std::to_string(nominal_accumulation(options_.batch, options_.nbs)) + " batches after warm-up)",
      "engine: " + engine_->describe() +
          (ranks > 1 ? "; data-parallel over " + std::to_string(ranks) + " ranks (devices " +
                           options_.devices + "), " + std::to_string(rank_batch) + " images a rank per batch"
                     : ""),
      (resume ? "resuming " : "writing ") + folder_.string() +
          (resume ? " at epoch " + std::to_string(position_.epoch + 1) : "")};
}

Trainer::~Trainer() = default;

void Trainer::log(const std::string& line) const {
  if (hooks_.log) hooks_.log(line);
}

bool Trainer::lead() const {
  return !rank_.communicator || rank_.communicator->rank() == 0;
}

bool Trainer::agreed(bool rank0_value) const {
  if (!rank_.communicator) return rank0_value;
  char value = rank0_value;
  rank_.communicator->broadcast_host(&value, 1, 0);
  return value != 0;
}

TrainSummary Trainer::run() {
  bool interrupted = false;
  for (int epoch = position_.epoch; epoch < options_.epochs && !stopped_early_; ++epoch) {
    const Clock::time_point start = Clock::now();
    const bool finished = train_epoch(epoch);
    position_.seconds += std::chrono::duration<double>(Clock::now() - start).count();
    if (!finished) {
      interrupted = true;
      if (lead()) {
        save_state();
        save_trained_weights(ema_->model(), *base_, folder_ / "weights", "last", training_record(epoch - 1));
      }
      break;
    }
    finish_epoch(epoch);
  }
  return {folder_,     position_.epoch,        stopped_early_,
          interrupted, position_.best_fitness, position_.best_epoch};
}

bool Trainer::train_epoch(int epoch) {
  loader_->start_epoch(epoch, options_.epochs);
  const long long batches = (long long)loader_->batches_per_epoch();
  loss::LossConfig config;
  config.epoch = epoch, config.epochs = options_.epochs;
  long long index = 0;
  for (; index < position_.next_batch; ++index) loader_->next();  // what the interrupted run already did
  for (std::optional<TrainBatch> batch = loader_->next(), next; batch; batch = std::move(next), ++index) {
    StepReport report;
    report.epoch = epoch, report.epochs = options_.epochs, report.batch_index = index,
    report.batches = batches;
    report.iteration = index + batches * epoch;
    report.images = batch->batch;
    const ScheduledStep scheduled = schedule_->at(epoch, index);
    report.loss = engine_->accumulate(*batch, config);
    // The next batch while this one's backward runs: its images start moving to the device beside it.
    if ((next = loader_->next())) engine_->stage(*next);
    const loss::HeadWeights& w = report.loss.weights;
    const loss::HeadLoss &o2m = report.loss.one2many, &o2o = report.loss.one2one;
    position_.loss_sums[0] += w.one2many * o2m.box + w.one2one * o2o.box;
    position_.loss_sums[1] += w.one2many * o2m.cls + w.one2one * o2o.cls;
    position_.loss_sums[2] += w.one2many * o2m.l1 + w.one2one * o2o.l1;
    for (int c = 0; c < 3; ++c)
      report.mean_loss[size_t(c)] = position_.loss_sums[size_t(c)] / double(index + 1);
    report.lr = last_lr_ = scheduled.lr;
    report.momentum = scheduled.momentum;
    if (report.iteration - position_.last_opt_step >= scheduled.accumulate) {
      if (hooks_.on_step) report.module_grad_norms = engine_->gradient_norms();
      report.grad_norm = engine_->step({scheduled.lr, scheduled.momentum, weight_decay_, options_.max_norm});
      report.stepped = true;
      report.loss_scale = engine_->loss_scale();
      if (lead()) {
        engine_->read_parameters(model_);
        ema_->update(model_);
      }
      position_.last_opt_step = report.iteration;
    }
    if (hooks_.on_step) hooks_.on_step(report);
    if (agreed(hooks_.should_stop && hooks_.should_stop())) {
      position_.epoch = epoch, position_.next_batch = index + 1;
      return false;
    }
  }
  position_.epoch = epoch, position_.next_batch = index;
  return true;
}

void Trainer::finish_epoch(int epoch) {
  if (!lead()) {  // rank 0 validates and writes; the others learn whether it stops early
    position_.epoch = epoch + 1, position_.next_batch = 0, position_.loss_sums = {};
    stopped_early_ = agreed(false);
    return;
  }
  EpochReport report;
  report.epoch = epoch, report.epochs = options_.epochs, report.lr = last_lr_;
  const double batches = double(std::max<long long>(position_.next_batch, 1));
  for (int c = 0; c < 3; ++c) report.train_loss[size_t(c)] = position_.loss_sums[size_t(c)] / batches;
  const bool final_epoch = epoch + 1 == options_.epochs;
  if (options_.val || final_epoch) {
    DetectStreamOptions stream;
    stream.detector.imgsz = options_.imgsz, stream.detector.rect = true, stream.detector.conf = 0.001f;
    stream.batch = options_.batch, stream.host_threads = std::max(1, options_.workers);
    val::ValHooks hooks;
    hooks.make_detector = [&](int) {  // on the training backend
      return std::make_unique<Detector>(ema_->model(), options_.backend, context_, stream.detector);
    };
    hooks.warn = [&](const std::string& line) { log("warning: " + line); };
    metrics_ = val::validate(val_split_, stream, hooks).metrics;
    report.validated = true;
    report.fitness = fitness_of(metrics_);
    if (position_.best_fitness < 0 || report.fitness > position_.best_fitness) {
      position_.best_fitness = report.fitness, position_.best_epoch = epoch;
      report.best = true;
    }
    stopped_early_ = options_.patience > 0 && epoch - position_.best_epoch >= options_.patience;
  }
  report.metrics = metrics_;
  report.seconds = position_.seconds;

  EpochRow row{epoch + 1,       position_.seconds, report.train_loss, metrics_.precision,
               metrics_.recall, metrics_.map50,    metrics_.map50_95, report.lr,
               engine_->loss_scale()};
  if (position_.results_csv.empty()) position_.results_csv = results_csv_header(row.loss_scale.has_value());
  position_.results_csv += results_csv_row(row);
  position_.epoch = epoch + 1, position_.next_batch = 0, position_.loss_sums = {};
  position_.ema_updates = ema_->updates();
  save_state();
  write_file_atomically(folder_ / "results.csv", position_.results_csv);
  save_weights(report);
  if (hooks_.on_epoch) hooks_.on_epoch(report);
  stopped_early_ = agreed(stopped_early_);
  if (stopped_early_)
    log("stopping early: no improvement in the last " + std::to_string(options_.patience) +
        " epochs; the best was epoch " + std::to_string(position_.best_epoch + 1));
}

TrainingRecord Trainer::training_record(int epoch) const {
  return {epoch,
          {{"metrics/precision(B)", metrics_.precision},
           {"metrics/recall(B)", metrics_.recall},
           {"metrics/mAP50(B)", metrics_.map50},
           {"metrics/mAP50-95(B)", metrics_.map50_95},
           {"fitness", fitness_of(metrics_)}}};
}

void Trainer::save_weights(const EpochReport& report) {
  const TrainingRecord record = training_record(report.epoch);
  save_trained_weights(ema_->model(), *base_, folder_ / "weights", "last", record);
  if (report.best) save_trained_weights(ema_->model(), *base_, folder_ / "weights", "best", record);
  try {
    plot_results(folder_ / "results.csv", folder_ / "results.png");
  } catch (const UsageError& e) {  // the plot is a view of results.csv; training goes on without it
    log(std::string("warning: results.png not drawn: ") + e.what());
  }
}

void Trainer::save_state() {
  position_.ema_updates = ema_->updates();
  save_train_state(last_state_path(folder_), position_, model_, ema_->model(), engine_->optimizer_state());
}

}  // namespace lab::train
