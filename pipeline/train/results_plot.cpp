// plot_results: the layout, the smoothing, and one PLplot stream (its own, ended with plend1, under a
// mutex: PLplot's state is global) drawing every panel into an RGB buffer.
#include "pipeline/train/results_plot.hpp"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <mutex>

#include <plplot.h>

#include "nvrtc_runtime/errors.hpp"
#include "nvrtc_runtime/printable_text.hpp"
#include "pipeline/image/image.hpp"

namespace lab::train {

namespace {

bool starts_with(const std::string& text, const std::string& prefix) {
  return text.rfind(prefix, 0) == 0;
}

bool is_loss(const std::string& name, const std::string& split) {
  return starts_with(name, split + "/") && name.find("loss") != std::string::npos;
}

bool first_row_metric(const std::string& name) {
  return starts_with(name, "metrics/") &&
         (name.find("precision") != std::string::npos || name.find("recall") != std::string::npos);
}

const ResultsColumn* column_named(const std::vector<ResultsColumn>& columns, const std::string& name) {
  for (const ResultsColumn& column : columns)
    if (column.name == name) return &column;
  return nullptr;
}

// PLplot exits the process on a fatal error (no driver found, no font file): what it needs is checked before
// it is started, in the folders it will look in.
std::filesystem::path folder_from(const char* variable, const std::filesystem::path& fallback) {
  const char* value = std::getenv(variable);
  return value != nullptr && *value != '\0' ? std::filesystem::path(value) : fallback;
}

void check_plplot_ready(const std::string& png) {
  const std::filesystem::path drivers = folder_from("PLPLOT_DRV_DIR", LAB_PLPLOT_DRIVERS_DIR);
  if (!std::filesystem::exists(drivers / "mem.driver_info") || !std::filesystem::exists(drivers / "mem.so"))
    throw UsageError(png + ": PLplot's mem driver is not in " + printable_path(drivers) +
                     " (set PLPLOT_DRV_DIR to the folder holding mem.so and mem.driver_info)");
  const std::filesystem::path fonts = folder_from("PLPLOT_LIB", "/usr/share/plplot" PLPLOT_VERSION);
  if (!std::filesystem::exists(fonts / "plxtnd5.fnt") || !std::filesystem::exists(fonts / "plstnd5.fnt"))
    throw UsageError(png + ": PLplot's font files are not in " + printable_path(fonts) +
                     " (set PLPLOT_LIB to the folder holding plstnd5.fnt and plxtnd5.fnt)");
}

struct Range {
  double low = INFINITY, high = -INFINITY;
  void add(double v) {
    if (!std::isfinite(v)) return;
    low = std::min(low, v);
    high = std::max(high, v);
  }
  // Widened by 5 % on each side (matplotlib's margin); an empty range becomes 0..1, a flat one gets a span.
  // Flat includes a span of a few ulps (a single epoch's value and its smoothed twin differ by rounding):
  // PLplot's tick search never ends on such a window.
  void pad() {
    if (low > high) low = 0, high = 1;
    if (high - low <= 1e-9 * std::max({std::fabs(low), std::fabs(high), 1.0})) {
      const double half = std::max(std::fabs(low), 1.0) * 0.05;
      low -= half;
      high += half;
    }
    const double margin = 0.05 * (high - low);
    low -= margin;
    high += margin;
  }
};

// The finite points of (x, y) as runs of consecutive rows, so a missing value breaks the line.
std::vector<std::pair<std::vector<PLFLT>, std::vector<PLFLT>>> runs(const std::vector<double>& x,
                                                                    const std::vector<double>& y) {
  std::vector<std::pair<std::vector<PLFLT>, std::vector<PLFLT>>> out(1);
  for (size_t i = 0; i < y.size(); ++i) {
    if (!std::isfinite(y[i]) || !std::isfinite(x[i])) {
      if (!out.back().first.empty()) out.emplace_back();
      continue;
    }
    out.back().first.push_back(x[i]);
    out.back().second.push_back(y[i]);
  }
  return out;
}

enum Colour { kBackground = 0, kInk = 1, kValues = 2, kSmooth = 3 };

void draw_panel(const std::string& title, const std::vector<double>& x, const std::vector<double>& y) {
  const std::vector<double> smooth = smoothed(y);
  Range xs, ys;
  for (double v : x) xs.add(v);
  for (size_t i = 0; i < y.size(); ++i) ys.add(y[i]), ys.add(smooth[i]);
  xs.pad();
  ys.pad();
  plcol0(kInk);
  plvpor(0.28, 0.96, 0.12, 0.86);
  plwind(xs.low, xs.high, ys.low, ys.high);
  plschr(0, 0.8);  // tick labels such as "0.875" and titles such as "metrics/mAP50-95(B)" fit the panel
  plsyax(6, 0);    // plain numbers up to six digits: no "(x10^-3)" label above the axis
  // Epochs are whole numbers: ticks one or more epochs apart.
  const double epoch_tick = std::max(1.0, std::ceil((xs.high - xs.low) / 6));
  plbox("bcnst", epoch_tick, 0, "bcnstv", 0, 0);
  plmtex("t", 1.4, 0.5, 0.5, title.c_str());
  plschr(0, 1.0);
  plcol0(kValues);
  for (auto& [px, py] : runs(x, y)) {
    if (px.empty()) continue;
    plline(PLINT(px.size()), px.data(), py.data());
    plpoin(PLINT(px.size()), px.data(), py.data(), 17);  // a filled dot per epoch
  }
  plcol0(kSmooth);
  pllsty(3);  // dotted, as Ultralytics' ":" line
  for (auto& [px, py] : runs(x, smooth))
    if (px.size() > 1) plline(PLINT(px.size()), px.data(), py.data());
  pllsty(1);
}

std::mutex& plplot_mutex() {
  static std::mutex mutex;
  return mutex;
}

}  // namespace

std::vector<std::vector<std::string>> results_panel_rows(const std::vector<ResultsColumn>& columns) {
  std::vector<std::vector<std::string>> rows(2);
  for (const ResultsColumn& c : columns)
    if (is_loss(c.name, "train")) rows[0].push_back(c.name);
  for (const ResultsColumn& c : columns)
    if (first_row_metric(c.name)) rows[0].push_back(c.name);
  for (const ResultsColumn& c : columns)
    if (is_loss(c.name, "val")) rows[1].push_back(c.name);
  for (const ResultsColumn& c : columns)
    if (starts_with(c.name, "metrics/") && !first_row_metric(c.name)) rows[1].push_back(c.name);
  return rows;
}

std::vector<double> smoothed(const std::vector<double>& values) {
  constexpr double kSigma = 3;
  constexpr int kRadius = 12;  // scipy's truncate = 4 sigma
  const int n = int(values.size());
  std::vector<double> out(values.size(), NAN);
  for (int i = 0; i < n; ++i) {
    double sum = 0, weights = 0;
    for (int k = -kRadius; k <= kRadius; ++k) {
      int j = i + k;
      while (j < 0 || j >= n) j = j < 0 ? -j - 1 : 2 * n - j - 1;  // reflect: d c b a | a b c d | d c b a
      if (!std::isfinite(values[size_t(j)])) continue;
      const double w = std::exp(-0.5 * (k / kSigma) * (k / kSigma));
      sum += w * values[size_t(j)];
      weights += w;
    }
    if (weights > 0 && std::isfinite(values[size_t(i)])) out[size_t(i)] = sum / weights;
  }
  return out;
}

void plot_results(const std::filesystem::path& csv, const std::filesystem::path& png) {
  const std::vector<ResultsColumn> columns = read_results_csv(csv);
  const std::vector<std::vector<std::string>> rows = results_panel_rows(columns);
  const size_t per_row = std::max(rows[0].size(), rows[1].size());
  if (per_row == 0)
    throw UsageError(printable_path(csv) +
                     ": no loss or metrics columns to plot (train/*loss*, val/*loss*, " + "metrics/*)");
  const size_t count = columns.front().values.size();
  std::vector<double> x(count);
  const ResultsColumn* epoch = column_named(columns, "epoch");
  for (size_t i = 0; i < count; ++i) x[i] = epoch != nullptr ? epoch->values[i] : double(i + 1);

  Image image(kResultsWidth, kResultsHeight, 255);
  {
    const std::lock_guard<std::mutex> lock(plplot_mutex());
    check_plplot_ready(printable_path(png));
    PLINT previous = 0, stream = 0;
    plgstrm(&previous);
    plmkstrm(&stream);
    plsdev("mem");
    plsmem(kResultsWidth, kResultsHeight, image.rgb.data());
    plscol0(kBackground, 255, 255, 255);
    plscol0(kInk, 0, 0, 0);
    plscol0(kValues, 31, 119, 180);  // matplotlib's first two colours
    plscol0(kSmooth, 255, 127, 14);
    plssub(PLINT(per_row), 2);
    plinit();
    for (size_t r = 0; r < rows.size(); ++r)
      for (size_t c = 0; c < rows[r].size(); ++c) {
        pladv(PLINT(r * per_row + c + 1));
        draw_panel(rows[r][c], x, column_named(columns, rows[r][c])->values);
      }
    plend1();
    plsstrm(previous);
  }
  write_image(image, png);
}

}  // namespace lab::train
