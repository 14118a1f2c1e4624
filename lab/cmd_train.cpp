// `lab train DATA.yaml`: trains YOLO26 on a YOLO-format dataset (pipeline/train/trainer): a header of what
// the run does, a progress line per epoch with the running mean loss components, one line per finished
// epoch with the validation metrics, and the run folder's outputs (runs/train/<name>/: args.yaml,
// results.csv, weights/). Ctrl-C stops after the current iteration and saves the state `--resume` reads.
// `--devices 0,1` trains data-parallel, one rank per device (pipeline/train/data_parallel_trainer); with
// `--nnodes N --node-rank R --rendezvous FILE | --master HOST:PORT`, across hosts.
#include <atomic>
#include <cstdio>
#include <csignal>
#include <iostream>

#include "harness/progress.hpp"
#include "lab/commands.hpp"
#include "lab/network_options.hpp"
#include "lab/option_checks.hpp"
#include "lab/size_options.hpp"
#include "lab/table.hpp"
#include "nvrtc_runtime/runtime_context.hpp"
#include "pipeline/train/data_parallel_trainer.hpp"

namespace lab {
namespace {

std::atomic<bool> interrupt_requested{false};

extern "C" void request_stop(int) {
  interrupt_requested = true;
  std::signal(SIGINT, SIG_DFL);  // a second Ctrl-C ends the process at once
}

std::string number(double v) {
  return format_sig(v, 4);
}

std::string losses_text(const std::array<double, 3>& loss) {
  return "box " + number(loss[0]) + "  cls " + number(loss[1]) + "  l1 " + number(loss[2]);
}

// fp16 runs: "  scale 65536 (1 skipped)"; empty otherwise.
std::string loss_scale_text(const std::optional<train::LossScaleState>& s) {
  if (!s) return "";
  char scale[32];
  std::snprintf(scale, sizeof scale, "%g", s->scale);
  return "  scale " + std::string(scale) + " (" + std::to_string(s->skipped_steps) + " skipped)";
}

// auto: cuda with a GPU, else the cpu emulator (the float64 reference trains only when asked for).
std::string resolved_backend(const std::string& backend) {
  if (backend != "auto") return backend;
  for (const std::string& name : available_backends())
    if (name == "cuda") return name;
  return "cpu";
}

struct TrainCli {
  train::TrainOptions options;
  std::string resume;
  bool resuming = false;
};

void run_train(TrainCli cli, const CliState& state) {
  train::TrainOptions& o = cli.options;
  if (!cli.resuming && o.data.empty()) throw UsageError("lab train: DATA.yaml is required (or --resume)");
  o.imgsz = rounded_imgsz(o.imgsz);
  o.backend = resolved_backend(o.backend);
  const bool several_devices = o.devices == "all" || o.devices.find(',') != std::string::npos;
  if (o.engine == "auto") o.engine = o.backend == "cuda" || several_devices ? "device" : "host";
  Progress progress(true);
  train::TrainHooks hooks;
  hooks.log = [&](const std::string& line) {
    progress.finish();
    std::cerr << "lab: " << line << "\n";
  };
  std::optional<train::LossScaleState> loss_scale;  // the last step's (fp16)
  hooks.on_step = [&](const train::StepReport& r) {
    if (r.loss_scale) loss_scale = r.loss_scale;
    progress.update(size_t(r.batch_index + 1), size_t(r.batches),
                    "epoch " + std::to_string(r.epoch + 1) + "/" + std::to_string(r.epochs) + "  " +
                        losses_text(r.mean_loss) + loss_scale_text(loss_scale));
  };
  hooks.on_epoch = [&](const train::EpochReport& r) {
    progress.finish();
    std::cout << "epoch " << r.epoch + 1 << "/" << r.epochs << ": " << losses_text(r.train_loss);
    if (r.validated)
      std::cout << " | P " << number(r.metrics.precision) << "  R " << number(r.metrics.recall) << "  mAP50 "
                << number(r.metrics.map50) << "  mAP50-95 " << number(r.metrics.map50_95) << "  fitness "
                << number(r.fitness) << (r.best ? " (best)" : "");
    std::cout << " | " << number(r.seconds) << " s\n" << std::flush;
  };
  hooks.should_stop = [] { return interrupt_requested.load(); };

  train::DataParallelTrainer trainer(o, cli.resuming ? std::optional<std::string>(cli.resume) : std::nullopt,
                                     state.context(), hooks);
  for (const std::string& line : trainer.description()) std::cout << line << "\n";
  std::cout << std::flush;
  interrupt_requested = false;
  std::signal(SIGINT, request_stop);
  const train::TrainSummary summary = trainer.run();
  std::signal(SIGINT, SIG_DFL);
  progress.finish();
  if (summary.interrupted)
    std::cout << "interrupted after the current iteration; state saved: lab train --resume "
              << summary.folder.string() << "\n";
  std::cout << summary.epochs_done << " epochs done"
            << (summary.best_epoch >= 0 ? ", best fitness " + number(summary.best_fitness) + " at epoch " +
                                              std::to_string(summary.best_epoch + 1)
                                        : "")
            << "; results in " << summary.folder.string() << "\n";
}

}  // namespace

void add_train_command(CLI::App& app, CliState& state) {
  auto* cmd =
      app.add_subcommand("train",
                         "Train YOLO26 on a YOLO-format dataset as Ultralytics does (warm-up, linear lr "
                         "decay, EMA, nominal-batch "
                         "accumulation, validation of the EMA each epoch); outputs in runs/train/<name>/");
  auto cli = std::make_shared<TrainCli>();
  train::TrainOptions& o = cli->options;
  o.backend = "auto", o.engine = "auto";
  cmd->add_option("data", o.data, "Dataset YAML (path, train, val, names)");
  add_model_option(cmd, o.model);
  cmd->add_option("--epochs", o.epochs, "Epochs to train")->capture_default_str();
  cmd->add_option("--batch", o.batch, "Images per batch")->capture_default_str();
  cmd->add_option("--imgsz", o.imgsz, "Training image size (square; rounded up to a multiple of 32)")
      ->check(imgsz_range())
      ->capture_default_str();
  cmd->add_option("--optimizer", o.optimizer, "auto, SGD, AdamW or MuSGD (auto as Ultralytics chooses)")
      ->capture_default_str();
  cmd->add_option("--lr0", o.lr0, "Initial learning rate (SGD, AdamW, MuSGD; auto picks its own)")
      ->capture_default_str();
  cmd->add_option("--lrf", o.lrf, "Final learning rate as a fraction of lr0 (linear decay)")
      ->capture_default_str();
  cmd->add_option("--momentum", o.momentum, "SGD momentum / AdamW beta1")->capture_default_str();
  cmd->add_option("--weight-decay", o.weight_decay,
                  "Weight decay of the weights (scaled to the nominal batch)")
      ->capture_default_str();
  cmd->add_option("--warmup-epochs", o.warmup_epochs, "Warm-up length in epochs (at least 100 iterations)")
      ->capture_default_str();
  cmd->add_option("--warmup-momentum", o.warmup_momentum, "Momentum at the warm-up's start")
      ->capture_default_str();
  cmd->add_option("--warmup-bias-lr", o.warmup_bias_lr, "Bias learning rate at the warm-up's start")
      ->capture_default_str();
  cmd->add_option("--nbs", o.nbs, "Nominal batch size (gradients accumulated to it)")->capture_default_str();
  cmd->add_option("--max-norm", o.max_norm, "Gradient norm clipping")->capture_default_str();
  cmd->add_option("--patience", o.patience, "Stop after this many epochs without improvement (0: never)")
      ->capture_default_str();
  cmd->add_option("--seed", o.seed, "Seed of the shuffle, the augmentation and re-initialised layers")
      ->capture_default_str();
  cmd->add_option("--workers", o.workers, "Loader threads (0: on the training thread)")
      ->capture_default_str();
  cmd->add_flag("--val,!--no-val", o.val,
                "Validate the EMA model after every epoch (else after the last only)")
      ->capture_default_str();
  cmd->add_option("--close-mosaic", o.augment.close_mosaic, "The last N epochs without mosaic")
      ->capture_default_str();
  cmd->add_option("--hsv-h", o.augment.hsv_h, "Hue gain")->capture_default_str();
  cmd->add_option("--hsv-s", o.augment.hsv_s, "Saturation gain")->capture_default_str();
  cmd->add_option("--hsv-v", o.augment.hsv_v, "Value gain")->capture_default_str();
  cmd->add_option("--translate", o.augment.translate, "Translation, fraction of the size")
      ->capture_default_str();
  cmd->add_option("--scale", o.augment.scale, "Scale gain")->capture_default_str();
  cmd->add_option("--fliplr", o.augment.fliplr, "Horizontal flip probability")->capture_default_str();
  cmd->add_option("--mosaic", o.augment.mosaic, "Mosaic probability")->capture_default_str();
  cmd->add_option("--degrees", o.augment.degrees, "Rotation, +- degrees")->capture_default_str();
  cmd->add_option("--shear", o.augment.shear, "Shear, +- degrees")->capture_default_str();
  cmd->add_option("--perspective", o.augment.perspective, "Perspective")->capture_default_str();
  cmd->add_option("--project", o.project, "Folder of the runs")->capture_default_str();
  cmd->add_option("--name", o.name, "The run's folder name (train2, train3 ... when it exists)")
      ->capture_default_str();
  cmd->add_flag("--exist-ok", o.exist_ok, "Write into PROJECT/NAME even when it exists");
  cmd->add_option(
         "--resume", cli->resume,
         "Continue a run from its last state: its folder or weights/last_state.safetensors (alone: the "
         "newest run under --project)")
      ->expected(0, 1);
  cmd->add_option(
         "--backend", o.backend,
         "auto (cuda with a GPU, else cpu), cpu (our kernels on the emulator), cuda, or reference (the "
         "float64 reference backward)")
      ->check(CLI::IsMember({"auto", "cpu", "cuda", "reference"}))
      ->capture_default_str();
  cmd->add_option(
         "--engine", o.engine,
         "auto (device on cuda, else host), host (gradients summed and the optimizer step on the host, "
         "float64), or device (parameters, gradients and optimizer state resident on the backend)")
      ->check(CLI::IsMember({"auto", "host", "device"}))
      ->capture_default_str();
  cmd->add_option("--devices", o.devices,
                  "Data-parallel ranks, one per device: 0,1 or all (every CUDA GPU); with --backend cpu, "
                  "emulated ranks 0..n-1. --batch is the total, split evenly; rank 0 writes the run")
      ->capture_default_str();
  cmd->add_option("--nnodes", o.nnodes,
                  "Hosts of a multi-host run (cuda, NCCL), each running its --devices ranks, the same number "
                  "on every host; --batch is the total over every host's ranks")
      ->capture_default_str();
  cmd->add_option("--node-rank", o.node_rank, "This host's rank, 0 .. nnodes-1 (node 0 writes the run)")
      ->capture_default_str();
  cmd->add_option("--rendezvous", o.rendezvous,
                  "Multi-host: a file on a file system every host sees, through which node 0 passes NCCL's id "
                  "(a fresh path per run)");
  cmd->add_option("--master", o.master, "Multi-host: HOST:PORT of node 0, which listens there for the others");
  cmd->add_option("--precision", o.precision,
                  "fp32, or fp16 / bf16 conv products (float32 master weights; --engine device)")
      ->capture_default_str();
  cmd->add_option(
         "--bn", o.bn,
         "frozen (the checkpoint's running statistics folded into each conv, for fine-tuning) or "
         "batch (BatchNorm in train mode, for training from scratch: the batch's statistics, the "
         "running ones updated with momentum 0.03 for validation and the saved weights; BatchNorm in "
         "float32 at every precision)")
      ->capture_default_str();
  cmd->footer(
      "A dataset to try it on: lab data synth shapes --train 2000 --val 200\n\n"
      "Examples:\n"
      "  lab train shapes/data.yaml --model yolo26n.pt --epochs 10 --batch 32 --imgsz 640\n"
      "  lab train shapes/data.yaml --devices 0,1 --batch 64  (two GPUs, 32 images each)\n"
      "  lab train --resume runs/train/train\n");
  cmd->callback([&state, cli, cmd] {
    TrainCli run = *cli;
    run.resuming = cmd->count("--resume") > 0;
    run_train(run, state);
  });
}

}  // namespace lab
