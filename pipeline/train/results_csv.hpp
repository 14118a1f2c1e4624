// results.csv of a training run: one row per finished epoch, Ultralytics' column names (the loss columns
// named after our loss components), numbers written with "%.6g" as Ultralytics does; and the file read back
// into columns (for results.png).
#pragma once
#include <array>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "pipeline/train/train_engine.hpp"

namespace lab::train {

struct EpochRow {
  int epoch = 0;                       // 1-based, as the csv shows it
  double seconds = 0;                  // since the run started, summed over resumed parts
  std::array<double, 3> train_loss{};  // box, cls, l1: the epoch's mean per image
  double precision = 0, recall = 0, map50 = 0, map50_95 = 0;
  std::array<double, kParameterGroups> lr{};
  std::optional<LossScaleState> loss_scale;  // fp16 runs: the loss scaler at the epoch's end
};

// "epoch,time,train/box_loss,train/cls_loss,train/l1_loss,metrics/precision(B),...,lr/pg0,lr/pg1,lr/pg2\n";
// with `loss_scale` (fp16 runs) two more columns: amp/loss_scale, amp/skipped_steps.
std::string results_csv_header(bool loss_scale = false);
std::string results_csv_row(const EpochRow& row);

struct ResultsColumn {
  std::string name;            // the header cell, trimmed
  std::vector<double> values;  // one per row; NaN where the cell is empty
};

// Every column of a results.csv (ours or Ultralytics'), in file order. UsageError "<csv>: ..." for an
// unreadable file or one without a header or rows, "<csv> line N: ..." for a row with another field count or
// a cell that is not a number.
std::vector<ResultsColumn> read_results_csv(const std::filesystem::path& csv);

}  // namespace lab::train
