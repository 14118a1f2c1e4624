// Slice layout, diff grids and cell-to-element mapping.
#include "viewer/diff_slices.hpp"

#include <algorithm>
#include <cmath>

namespace lab::viewer {

namespace {

// Largest heatmap side in cells (texture size and readability).
constexpr size_t kMaxCells = 1024;

double diff_at(const OutputCheck& c, size_t i) {
  const double d = std::abs(static_cast<double>(c.out[i]) - static_cast<double>(c.ref[i]));
  return std::isfinite(c.out[i]) ? d : NAN;
}

}  // namespace

SliceLayout slice_layout(const OutputCheck& c) {
  SliceLayout l;
  const size_t n = c.out.size();
  if (n == 0) return l;
  if (c.shape.size() >= 2) {
    l.rows = c.shape[c.shape.size() - 2];
    l.cols = c.shape.back();
    l.slices = n / std::max<size_t>(1, l.rows * l.cols);
    l.note = "slices over the leading dimensions; rows x cols = the last two";
  } else {
    l.cols = static_cast<size_t>(std::ceil(std::sqrt(static_cast<double>(n))));
    l.rows = (n + l.cols - 1) / l.cols;
    l.slices = 1;
    l.note = "1-D output wrapped into " + std::to_string(l.rows) + " x " + std::to_string(l.cols);
  }
  l.row_step = (l.rows + kMaxCells - 1) / kMaxCells;
  l.col_step = (l.cols + kMaxCells - 1) / kMaxCells;
  if (l.row_step > 1 || l.col_step > 1)
    l.note += "; each cell is the max over " + std::to_string(l.row_step) + " x " +
              std::to_string(l.col_step) + " elements";
  return l;
}

HeatmapGrid diff_grid(const OutputCheck& c, const SliceLayout& l, size_t slice) {
  HeatmapGrid g;
  g.rows = static_cast<int>((l.rows + l.row_step - 1) / l.row_step);
  g.cols = static_cast<int>((l.cols + l.col_step - 1) / l.col_step);
  g.values.assign(static_cast<size_t>(g.rows) * g.cols, 0.0f);
  const size_t base = slice * l.rows * l.cols;
  for (size_t r = 0; r < l.rows; ++r)
    for (size_t col = 0; col < l.cols; ++col) {
      const size_t i = base + r * l.cols + col;
      if (i >= c.out.size()) continue;
      float& cell = g.values[(r / l.row_step) * g.cols + col / l.col_step];
      const double d = diff_at(c, i);
      if (std::isnan(d) || std::isnan(cell))
        cell = NAN;
      else
        cell = std::max(cell, static_cast<float>(d));
    }
  fit_range(g);
  g.lo = 0;
  return g;
}

size_t element_of_cell(const OutputCheck& c, const SliceLayout& l, size_t slice, int row, int col) {
  const size_t base = slice * l.rows * l.cols;
  size_t best = base + row * l.row_step * l.cols + col * l.col_step;
  double worst = -1;
  for (size_t r = row * l.row_step; r < std::min(l.rows, (row + 1) * l.row_step); ++r)
    for (size_t k = col * l.col_step; k < std::min(l.cols, (col + 1) * l.col_step); ++k) {
      const size_t i = base + r * l.cols + k;
      if (i >= c.out.size()) continue;
      const double d = diff_at(c, i);
      const double key = std::isnan(d) ? INFINITY : d;
      if (key > worst) {
        worst = key;
        best = i;
      }
    }
  return best;
}

void locate(const SliceLayout& l, size_t index, size_t& slice, size_t& row, size_t& col) {
  const size_t per_slice = std::max<size_t>(1, l.rows * l.cols);
  slice = index / per_slice;
  row = (index % per_slice) / std::max<size_t>(1, l.cols);
  col = index % std::max<size_t>(1, l.cols);
}

}  // namespace lab::viewer
