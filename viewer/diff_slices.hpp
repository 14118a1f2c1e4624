// Cutting a checked output into the 2-D slices the diff heatmap shows: |out - ref| over the last two
// dimensions (1-D outputs wrapped into a near-square grid), large slices reduced by max-pooling so every
// error stays visible, and the mapping from a heatmap cell back to the element index.
#pragma once
#include <cstddef>
#include <string>

#include "viewer/heatmap.hpp"
#include "kernels/compare.hpp"

namespace lab::viewer {

struct SliceLayout {
  size_t rows = 0, cols = 0, slices = 0;  // of the output (after wrapping a 1-D output)
  size_t row_step = 1, col_step = 1;      // elements per heatmap cell (max-pooled)
  std::string note;                       // how the output was laid out, for the UI
};

SliceLayout slice_layout(const OutputCheck& check);
// |out - ref| of one slice as a heatmap grid (non-finite outputs stay NaN: shown in magenta).
HeatmapGrid diff_grid(const OutputCheck& check, const SliceLayout& layout, size_t slice);
// Flat element index of the worst element inside a heatmap cell of a slice.
size_t element_of_cell(const OutputCheck& check, const SliceLayout& layout, size_t slice, int row, int col);
// Slice, row and column (of the output, not of the pooled grid) of a flat index.
void locate(const SliceLayout& layout, size_t index, size_t& slice, size_t& row, size_t& col);

}  // namespace lab::viewer
