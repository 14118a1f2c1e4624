// results.csv of a training run: one row per finished epoch, Ultralytics' column names (the loss columns
// named after our loss components), numbers written with "%.6g" as Ultralytics does.
#pragma once
#include <array>
#include <string>

#include "pipeline/train/train_engine.hpp"

namespace lab::train {

struct EpochRow {
  int epoch = 0;       // 1-based, as the csv shows it
  double seconds = 0;  // since the run started, summed over resumed parts
  std::array<double, 3> train_loss{};  // box, cls, l1: the epoch's mean per image
  double precision = 0, recall = 0, map50 = 0, map50_95 = 0;
  std::array<double, kParameterGroups> lr{};
};

// "epoch,time,train/box_loss,train/cls_loss,train/l1_loss,metrics/precision(B),...,lr/pg0,lr/pg1,lr/pg2\n"
std::string results_csv_header();
std::string results_csv_row(const EpochRow& row);

}  // namespace lab::train
