// `lab bench train-step`: one training iteration of DeviceTrainEngine (forward, loss with the assignment,
// backward, BatchNorm chain rule, clip and optimizer step, refold) on a seeded synthetic batch, timed over
// warm iterations (median / min / p90, CUDA events on cuda). With --devices, images/s per world size
// (bench_train_step_ranks).
#pragma once
#include <memory_resource>
#include <string>

#include "kernels/nn/precision.hpp"
#include "lab/cli_state.hpp"
#include "pipeline/train/train_engine.hpp"

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
  std::string devices;  // data-parallel ranks (pipeline/train/device_list.hpp); empty: one
  bool kernels = false;        // also a launch profile of one more iteration, launches timed as launched
  bool kernels_alone = false;  // the same profile with every launch timed alone (LaunchProfileTiming::Alone)
  size_t kernel_rows = 25;  // its table's rows (the rest summed in one)
};

void bench_train_step(const TrainStepBenchOptions& options, CliState& state);

// Seeded RGB bytes (as the loader hands them over: in `staging`, the loader's kind of memory) and four boxes
// per image (classes in turn, sides 1/8 to 1/2 of the image).
train::TrainBatch synthetic_train_batch(int batch, int imgsz, int classes, uint64_t seed,
                                        std::pmr::memory_resource& staging);

}  // namespace lab
