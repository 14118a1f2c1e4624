// Every setting of `lab train`, with Ultralytics 8.4's default.yaml defaults, their checked ranges (one-line
// UsageError naming the option) and args.yaml (the run's settings, written beside its outputs and read back
// by --resume).
#pragma once
#include <cstdint>
#include <filesystem>
#include <string>

#include "pipeline/train/augment_settings.hpp"

namespace lab::train {

struct TrainOptions {
  std::string data;   // dataset YAML
  std::string model;  // checkpoint to start from; empty: yolo26n.pt as lab detect finds it
  int epochs = 100, batch = 16, imgsz = 640;
  std::string optimizer = "auto";  // auto, SGD, AdamW, MuSGD
  double lr0 = 0.01, lrf = 0.01, momentum = 0.937, weight_decay = 5e-4;
  double warmup_epochs = 3, warmup_momentum = 0.8, warmup_bias_lr = 0.1;
  int nbs = 64;        // nominal batch size
  int patience = 100;  // 0: never stop early
  uint64_t seed = 0;
  int workers = 8;
  double max_norm = 10;     // gradient norm clipping
  bool val = true;          // validate after every epoch (false: after the last only)
  AugmentSettings augment;  // hsv_h .. mosaic, close_mosaic
  std::string project = "runs/train", name = "train";
  bool exist_ok = false;
  std::string backend = "cpu", precision = "fp32";
  std::string engine = "host";  // host (HostTrainEngine) or device (DeviceTrainEngine: our kernels only)
  std::string bn = "frozen";    // frozen or batch (batch-statistics BatchNorm)
  std::string devices;          // data-parallel ranks (device_list.hpp); empty: one rank
  // Multi-host data-parallel training (cuda, NCCL): this process is node `node_rank` of `nnodes`, each
  // running its --devices ranks (global rank = node_rank * local ranks + local index); the processes meet
  // through `rendezvous` (a file every node sees) or `master` (host:port of node 0). The launch's topology,
  // not a training setting: not in args.yaml (--resume takes the flags again).
  int nnodes = 1, node_rank = 0;
  std::string rendezvous, master;
};

// UsageError "--<option> <value>: <what is wrong>" for the first setting out of range; fp16 / bf16 only with
// the device engine; several --devices only with the device engine and a batch that divides over every
// node's ranks; check_node_options' rules.
void check_train_options(const TrainOptions& options);

// The multi-host flags: --nnodes at least 1, --node-rank in 0 .. nnodes-1, a rendezvous (--rendezvous or
// --master) for more than one node, any of them only with --backend cuda and the device engine, and the
// rendezvous file's folder existing. make_rendezvous checks the rest (one of the two, the address).
void check_node_options(const TrainOptions& options);

// args.yaml: every setting as `key: value`, one a line, Ultralytics' key names.
std::string args_yaml(const TrainOptions& options);
// Reads args.yaml back; UsageError naming the file for one that does not parse or lacks a key (but `bn` and
// `devices`, which runs from before the options lack: frozen, one rank).
TrainOptions read_args_yaml(const std::filesystem::path& file);

}  // namespace lab::train
