// results.png from results.csv, drawn with PLplot in Ultralytics' layout: one panel per column, the train
// losses then precision and recall on the first row, the val losses then mAP50 and mAP50-95 on the second;
// each panel the values per epoch (line and dots) and their Gaussian-smoothed line (sigma 3 epochs, dotted),
// titled with the column's name. PLplot renders into memory (its "mem" device, Hershey fonts: no cairo, no X)
// and pipeline/image writes the PNG.
#pragma once
#include <filesystem>
#include <string>
#include <vector>

#include "pipeline/train/results_csv.hpp"

namespace lab::train {

constexpr int kResultsWidth = 2400, kResultsHeight = 1200;  // Ultralytics' 12 x 6 inches at 200 dpi

// The panels, by row: row 0 the train/ losses then the precision and recall metrics, row 1 the val/ losses
// then the other metrics (epoch, lr/ and time columns are not drawn).
std::vector<std::vector<std::string>> results_panel_rows(const std::vector<ResultsColumn>& columns);

// Sigma-3 Gaussian smoothing with reflected edges over a 25-point window (scipy's gaussian_filter1d, which
// Ultralytics draws with); NaN values are left out of every window.
std::vector<double> smoothed(const std::vector<double>& values);

// Reads `csv` (read_results_csv's errors), draws the panels and writes `png` atomically, kResultsWidth x
// kResultsHeight. UsageError "<csv>: no loss or metrics columns to plot", "<png>: PLplot's mem driver is not
// in <folder> (set PLPLOT_DRV_DIR ...)" / "<png>: PLplot's font files are not in <folder> (set PLPLOT_LIB
// ...)", or the image writer's errors.
void plot_results(const std::filesystem::path& csv, const std::filesystem::path& png);

}  // namespace lab::train
