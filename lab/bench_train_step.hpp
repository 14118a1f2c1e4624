// `lab bench train-step`: one training iteration of DeviceTrainEngine (forward, loss with the assignment,
// backward, BatchNorm chain rule, clip and optimizer step, refold) on a seeded synthetic batch, timed over
// warm iterations (median / min / p90, CUDA events on cuda).
#pragma once
#include <string>

#include "kernels/nn/precision.hpp"
#include "lab/cli_state.hpp"

namespace lab {

struct TrainStepBenchOptions {
  std::string model;    // empty: the usual model lookup
  std::string backend;  // empty: cuda when present, else cpu
  std::string optimizer = "AdamW";
  Precision precision = Precision::Fp32;  // fp32, fp16 or bf16
  int batch = 1;
  int imgsz = 640;
  int iters = 0, warmup = -1;  // 0 / -1: the backend's default
  bool json = false;
  uint64_t seed = 1;
};

void bench_train_step(const TrainStepBenchOptions& options, CliState& state);

}  // namespace lab
