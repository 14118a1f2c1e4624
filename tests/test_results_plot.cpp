// results.png (pipeline/train/results_plot.hpp): a results.csv written here -> a PNG that decodes at
// 2400x1200 with drawing in every panel of Ultralytics' 2-row layout and nothing where no panel is; the
// panel order, the smoothing against scipy's gaussian_filter1d formula, and one-line errors for bad csv files
// and for PLplot's driver or fonts missing.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdlib>

#include "nvrtc_runtime/errors.hpp"
#include "pipeline/image/image.hpp"
#include "pipeline/train/results_plot.hpp"
#include "tests/test_helpers.hpp"

using namespace lab;
namespace fs = std::filesystem;

namespace {

const std::string kHeader =
    "epoch,train/box_loss,train/cls_loss,train/dfl_loss,metrics/precision(B),metrics/recall(B),"
    "metrics/mAP50(B),metrics/mAP50-95(B),val/box_loss,val/cls_loss,val/dfl_loss,lr/pg0,lr/pg1,lr/pg2\n";

std::string results_csv(int epochs) {
  std::string text = kHeader;
  for (int e = 1; e <= epochs; ++e) {
    const double decay = std::exp(-0.1 * e);
    char row[512];
    std::snprintf(row, sizeof row, "%d,%.5f,%.5f,%.5f,%.5f,%.5f,%.5f,%.5f,%.5f,%.5f,%.5f,%.6f,%.6f,%.6f\n", e,
                  1.5 * decay + 0.3, 2.5 * decay + 0.2, 0.9 * decay + 0.8, 1 - 0.8 * decay, 1 - 0.9 * decay,
                  0.9 - 0.8 * decay, 0.7 - 0.6 * decay, 1.4 * decay + 0.4, 2.2 * decay + 0.3,
                  0.8 * decay + 0.9, 0.01 * decay, 0.01 * decay, 0.01 * decay);
    text += row;
  }
  return text;
}

// Pixels in the rectangle that are not the white background.
size_t drawn(const Image& image, int x0, int y0, int x1, int y1) {
  size_t count = 0;
  for (int y = y0; y < y1; ++y)
    for (int x = x0; x < x1; ++x) {
      const uint8_t* p = image.pixel(x, y);
      if (p[0] != 255 || p[1] != 255 || p[2] != 255) ++count;
    }
  return count;
}

}  // namespace

TEST_CASE("results plot: Ultralytics' panel rows from the csv columns", "[train][plot]") {
  std::vector<train::ResultsColumn> columns;
  for (const char* name :
       {"epoch", "train/box_loss", "train/cls_loss", "train/dfl_loss", "metrics/precision(B)",
        "metrics/recall(B)", "metrics/mAP50(B)", "metrics/mAP50-95(B)", "val/box_loss", "val/cls_loss",
        "val/dfl_loss", "lr/pg0", "lr/pg1", "lr/pg2"})
    columns.push_back({name, {1.0}});
  const auto rows = train::results_panel_rows(columns);
  REQUIRE(rows.size() == 2);
  CHECK(rows[0] == std::vector<std::string>{"train/box_loss", "train/cls_loss", "train/dfl_loss",
                                            "metrics/precision(B)", "metrics/recall(B)"});
  CHECK(rows[1] == std::vector<std::string>{"val/box_loss", "val/cls_loss", "val/dfl_loss",
                                            "metrics/mAP50(B)", "metrics/mAP50-95(B)"});
}

TEST_CASE("results plot: the smoothed line is scipy's sigma-3 gaussian_filter1d with reflected edges",
          "[train][plot]") {
  // Written out from scipy's definition: weights exp(-k^2 / 18) for |k| <= 12, normalised; index -1 reads
  // element 0, -2 element 1, n reads n-1 (mode 'reflect').
  const std::vector<double> values = {4, 1, 3, 0, 2, 5, 1};
  const int n = int(values.size());
  std::vector<double> expected(values.size());
  for (int i = 0; i < n; ++i) {
    double sum = 0, norm = 0;
    for (int k = -12; k <= 12; ++k) {
      int j = i + k;
      for (int fold = 0; fold < 8; ++fold) {
        if (j < 0) j = -1 - j;
        if (j >= n) j = 2 * n - 1 - j;
      }
      sum += std::exp(-k * k / 18.0) * values[size_t(j)];
      norm += std::exp(-k * k / 18.0);
    }
    expected[size_t(i)] = sum / norm;
  }
  const std::vector<double> ours = train::smoothed(values);
  REQUIRE(ours.size() == expected.size());
  for (size_t i = 0; i < ours.size(); ++i) CHECK(ours[i] == Approx(expected[i]).epsilon(1e-12));
  CHECK(std::isnan(train::smoothed({1.0, NAN, 2.0})[1]));
  for (double v : train::smoothed({0.25, NAN, 0.25, 0.25})) CHECK((std::isnan(v) || v == Approx(0.25)));
}

TEST_CASE("results plot: results.csv -> results.png with drawing in every panel", "[train][plot]") {
  test::ScratchDir dir("results-plot");
  const fs::path csv = dir.path / "results.csv", png = dir.path / "results.png";
  test::write_file(csv, results_csv(30));
  train::plot_results(csv, png);
  const Image image = decode_image(png);
  REQUIRE(image.width == train::kResultsWidth);
  REQUIRE(image.height == train::kResultsHeight);
  const int panel_w = image.width / 5, panel_h = image.height / 2;
  for (int row = 0; row < 2; ++row)
    for (int col = 0; col < 5; ++col) {
      CAPTURE(row, col);
      const int x0 = col * panel_w, y0 = row * panel_h;
      CHECK(drawn(image, x0, y0, x0 + panel_w, y0 + panel_h) > 2000);
      // The values' blue and the smoothed line's orange are both inside the panel.
      size_t blue = 0, orange = 0;
      for (int y = y0; y < y0 + panel_h; ++y)
        for (int x = x0; x < x0 + panel_w; ++x) {
          const uint8_t* p = image.pixel(x, y);
          blue += p[0] == 31 && p[1] == 119 && p[2] == 180;
          orange += p[0] == 255 && p[1] == 127 && p[2] == 14;
        }
      CHECK(blue > 100);
      CHECK(orange > 20);
    }

  // Without val losses the second row holds only the two mAP panels; the rest of it stays blank.
  test::write_file(
      csv,
      "epoch,train/box_loss,metrics/precision(B),metrics/recall(B),metrics/mAP50(B),"
      "metrics/mAP50-95(B)\n1,2.0,0.1,0.2,0.1,0.05\n2,1.5,0.3,0.4,0.2,0.1\n3,1.2,,0.5,0.3,0.2\n");
  train::plot_results(csv, png);
  const Image three = decode_image(png);
  const int w3 = three.width / 3;
  for (int col = 0; col < 3; ++col) CHECK(drawn(three, col * w3, 0, (col + 1) * w3, panel_h) > 1000);
  CHECK(drawn(three, 0, panel_h, 2 * w3, three.height) > 1000);
  CHECK(drawn(three, 2 * w3 + 10, panel_h, three.width, three.height) == 0);
}

TEST_CASE("results plot: the first epoch's one-row csv draws each value as a dot", "[train][plot]") {
  // One row: the value and its smoothed twin differ by rounding only, a window of a few ulps on which
  // PLplot's tick search never ended (lab train's first epoch hung there).
  test::ScratchDir dir("results-plot-one-row");
  const fs::path csv = dir.path / "results.csv", png = dir.path / "results.png";
  test::write_file(csv,
                   "epoch,train/box_loss,train/cls_loss,train/l1_loss,metrics/precision(B),metrics/recall(B),"
                   "metrics/mAP50(B),metrics/mAP50-95(B)\n1,0.455584,1.87377,0.00553449,0.695289,0.685935,"
                   "0.751719,0.701052\n");
  train::plot_results(csv, png);
  const Image image = decode_image(png);
  const int panel_w = image.width / 5, panel_h = image.height / 2;
  for (int panel = 0; panel < 7; ++panel) {
    CAPTURE(panel);
    const int x0 = panel % 5 * panel_w, y0 = panel / 5 * panel_h;
    size_t blue = 0;
    for (int y = y0; y < y0 + panel_h; ++y)
      for (int x = x0; x < x0 + panel_w; ++x) {
        const uint8_t* p = image.pixel(x, y);
        blue += p[0] == 31 && p[1] == 119 && p[2] == 180;
      }
    CHECK(blue > 10);
  }
}

TEST_CASE("results plot: the results.csv lab train writes gives 5 + 2 panels", "[train][plot]") {
  test::ScratchDir dir("results-plot-ours");
  std::string text = train::results_csv_header();
  for (int e = 1; e <= 4; ++e)
    text += train::results_csv_row({.epoch = e,
                                    .seconds = 10.0 * e,
                                    .train_loss = {2.0 / e, 3.0 / e, 1.0 / e},
                                    .precision = 0.2 * e,
                                    .recall = 0.1 * e,
                                    .map50 = 0.15 * e,
                                    .map50_95 = 0.1 * e,
                                    .lr = {0.01, 0.01, 0.01}});
  test::write_file(dir.path / "results.csv", text);
  const auto rows = train::results_panel_rows(train::read_results_csv(dir.path / "results.csv"));
  CHECK(rows[0] == std::vector<std::string>{"train/box_loss", "train/cls_loss", "train/l1_loss",
                                            "metrics/precision(B)", "metrics/recall(B)"});
  CHECK(rows[1] == std::vector<std::string>{"metrics/mAP50(B)", "metrics/mAP50-95(B)"});
  train::plot_results(dir.path / "results.csv", dir.path / "results.png");
  const Image image = decode_image(dir.path / "results.png");
  const int panel_w = image.width / 5, panel_h = image.height / 2;
  for (int col = 0; col < 5; ++col)
    CHECK(drawn(image, col * panel_w, 0, (col + 1) * panel_w, panel_h) > 1000);
  for (int col = 0; col < 2; ++col)
    CHECK(drawn(image, col * panel_w, panel_h, (col + 1) * panel_w, image.height) > 1000);
  CHECK(drawn(image, 2 * panel_w + 10, panel_h, image.width, image.height) == 0);
}

TEST_CASE("results plot: bad results files are one-line errors and leave no png", "[train][plot]") {
  test::ScratchDir dir("results-plot-errors");
  const fs::path csv = dir.path / "results.csv", png = dir.path / "results.png";
  auto error_of = [&](const std::string& text) {
    test::write_file(csv, text);
    try {
      train::plot_results(csv, png);
    } catch (const UsageError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  CHECK_THAT(error_of(""), Catch::Contains("results.csv: no header line"));
  CHECK_THAT(error_of(kHeader), Catch::Contains("results.csv: no rows"));
  CHECK_THAT(error_of("epoch,train/box_loss\n1,2,3\n"),
             Catch::Contains("results.csv line 2: 3 fields, the header has 2"));
  CHECK_THAT(error_of("epoch,train/box_loss\n1,abc\n"),
             Catch::Contains("results.csv line 2: column 'train/box_loss' holds 'abc', not a number"));
  CHECK_THAT(error_of("epoch,lr/pg0\n1,0.01\n"), Catch::Contains("no loss or metrics columns to plot"));
  CHECK_THROWS_WITH(train::plot_results(dir.path / "absent.csv", png),
                    Catch::Contains("absent.csv: cannot read"));
  CHECK(!fs::exists(png));
}

TEST_CASE("results plot: a missing PLplot driver or font folder is a one-line error, not PLplot's exit",
          "[train][plot]") {
  test::ScratchDir dir("results-plot-plplot");
  const fs::path csv = dir.path / "results.csv", png = dir.path / "results.png";
  test::write_file(csv, results_csv(3));
  for (const char* variable : {"PLPLOT_DRV_DIR", "PLPLOT_LIB"}) {
    CAPTURE(variable);
    const char* before = std::getenv(variable);
    const std::string saved = before != nullptr ? before : "";
    ::setenv(variable, dir.path.c_str(), 1);  // a folder without PLplot's files
    std::string error = "no error";
    try {
      train::plot_results(csv, png);
    } catch (const UsageError& e) {
      error = e.what();
    }
    if (before != nullptr)
      ::setenv(variable, saved.c_str(), 1);
    else
      ::unsetenv(variable);
    CHECK_THAT(error, Catch::Contains("results.png: PLplot's") && Catch::Contains(variable));
    CHECK(!fs::exists(png));
  }
  train::plot_results(csv, png);  // the environment restored, it draws again
  CHECK(fs::exists(png));
}
