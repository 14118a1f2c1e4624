// results.csv rows (results_csv.hpp), and the reader: comma-separated, no quoting (the writer never quotes),
// cells trimmed of blanks.
#include "pipeline/train/results_csv.hpp"

#include <charconv>
#include <cstdio>
#include <limits>
#include <sstream>
#include <vector>

#include "nvrtc_runtime/errors.hpp"
#include "nvrtc_runtime/input_file.hpp"
#include "nvrtc_runtime/printable_text.hpp"

namespace lab::train {

std::string results_csv_header(bool loss_scale) {
  return std::string("epoch,time,train/box_loss,train/cls_loss,train/l1_loss,metrics/precision(B),"
                     "metrics/recall(B),metrics/mAP50(B),metrics/mAP50-95(B),lr/pg0,lr/pg1,lr/pg2") +
         (loss_scale ? ",amp/loss_scale,amp/skipped_steps\n" : "\n");
}

std::string results_csv_row(const EpochRow& row) {
  std::vector<double> values = {double(row.epoch), row.seconds,   row.train_loss[0], row.train_loss[1],
                                      row.train_loss[2], row.precision, row.recall,        row.map50,
                                      row.map50_95,      row.lr[0],     row.lr[1],         row.lr[2]};
  if (row.loss_scale)
    values.insert(values.end(), {row.loss_scale->scale, double(row.loss_scale->skipped_steps)});
  std::string line;
  for (double v : values) {
    char text[32];
    std::snprintf(text, sizeof text, "%.6g", v);
    line += (line.empty() ? "" : ",") + std::string(text);
  }
  return line + "\n";
}

namespace {

std::string trimmed(const std::string& text) {
  const size_t begin = text.find_first_not_of(" \t\r");
  if (begin == std::string::npos) return "";
  return text.substr(begin, text.find_last_not_of(" \t\r") - begin + 1);
}

std::vector<std::string> cells_of(const std::string& line) {
  std::vector<std::string> cells;
  std::stringstream stream(line);
  std::string cell;
  while (std::getline(stream, cell, ',')) cells.push_back(trimmed(cell));
  if (!line.empty() && line.back() == ',') cells.push_back("");
  return cells;
}

}  // namespace

std::vector<ResultsColumn> read_results_csv(const std::filesystem::path& csv) {
  const std::string file = printable_path(csv);
  std::stringstream text(read_input_file(csv, "results"));
  std::string line;
  std::vector<ResultsColumn> columns;
  size_t line_number = 0, rows = 0;
  while (std::getline(text, line)) {
    ++line_number;
    if (trimmed(line).empty()) continue;
    const std::vector<std::string> cells = cells_of(line);
    if (columns.empty()) {
      for (const std::string& name : cells) columns.push_back({name, {}});
      continue;
    }
    const std::string at = file + " line " + std::to_string(line_number) + ": ";
    if (cells.size() != columns.size())
      throw UsageError(at + std::to_string(cells.size()) + " fields, the header has " +
                       std::to_string(columns.size()));
    for (size_t c = 0; c < cells.size(); ++c) {
      double value = std::numeric_limits<double>::quiet_NaN();
      const std::string& cell = cells[c];
      if (!cell.empty()) {
        const auto [end, error] = std::from_chars(cell.data(), cell.data() + cell.size(), value);
        if (error != std::errc() || end != cell.data() + cell.size())
          throw UsageError(at + "column '" + printable(columns[c].name, 60) + "' holds '" +
                           printable(cell, 40) + "', not a number");
      }
      columns[c].values.push_back(value);
    }
    ++rows;
  }
  if (columns.empty()) throw UsageError(file + ": no header line (an empty results file)");
  if (rows == 0) throw UsageError(file + ": no rows (only the header)");
  return columns;
}

}  // namespace lab::train
