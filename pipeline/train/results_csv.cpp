// results.csv rows (results_csv.hpp).
#include "pipeline/train/results_csv.hpp"

#include <cstdio>
#include <vector>

namespace lab::train {

std::string results_csv_header() {
  return "epoch,time,train/box_loss,train/cls_loss,train/l1_loss,metrics/precision(B),metrics/recall(B),"
         "metrics/mAP50(B),metrics/mAP50-95(B),lr/pg0,lr/pg1,lr/pg2\n";
}

std::string results_csv_row(const EpochRow& row) {
  const std::vector<double> values = {double(row.epoch), row.seconds,   row.train_loss[0], row.train_loss[1],
                                      row.train_loss[2], row.precision, row.recall,        row.map50,
                                      row.map50_95,      row.lr[0],     row.lr[1],         row.lr[2]};
  std::string line;
  for (double v : values) {
    char text[32];
    std::snprintf(text, sizeof text, "%.6g", v);
    line += (line.empty() ? "" : ",") + std::string(text);
  }
  return line + "\n";
}

}  // namespace lab::train
