// What the `lab train` loop tests share (test_train_loop, test_data_parallel_train, test_data_parallel_engine):
// a synthetic dataset, the plain options of a short run on the shared yolo26n, a model's running statistics,
// and hooks that record every step and epoch.
#pragma once
#include <filesystem>
#include <string>
#include <vector>

#include "pipeline/train/trainer.hpp"

namespace lab::test {

// The shared assets' yolo26n.pt (absent on a fresh clone: the tests that need it skip).
std::filesystem::path shared_yolo26n_path();

// `lab data synth` into root/data: 2 classes, `train` images and 1 val image of imgsz; its data.yaml.
std::filesystem::path synth_train_dataset(const std::filesystem::path& root, int train, int imgsz,
                                          uint64_t seed);

// Plain batches (no augmentation, no warm-up), one optimizer step per batch: the loss curve is the model's.
train::TrainOptions plain_train_options(const std::filesystem::path& data,
                                        const std::filesystem::path& project, const std::string& backend);

// Every BatchNorm's running mean and variance, in for_each_conv order.
std::vector<double> running_statistics(const Yolo26Model& model);

struct RecordedRun {
  std::vector<train::StepReport> steps;
  std::vector<train::EpochReport> epochs;
};

// Hooks that record into `r` and ask to stop after `stop_after` steps (-1: never).
train::TrainHooks recording(RecordedRun& r, long long stop_after = -1);

// Runs `lab ARGS` and checks the refusal: exit 2 and one line on stderr that contains `message`.
void check_usage_error(const std::string& args, const std::string& message);

}  // namespace lab::test
