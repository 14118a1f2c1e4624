// Heatmaps of 2-D float grids: a colour map (dark blue -> yellow, non-finite in magenta), the texture of a
// grid, and an ImGui widget that draws it with a colour scale bar and reports the hovered/clicked cell.
#pragma once
#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "viewer/gl_texture.hpp"

namespace lab::viewer {

// t in [0, 1]; returns RGBA.
std::array<uint8_t, 4> heat_colour(double t);
inline constexpr std::array<uint8_t, 4> kNonFiniteColour{255, 0, 255, 255};

struct HeatmapGrid {
  int rows = 0, cols = 0;
  std::vector<float> values;  // rows * cols, row major
  double lo = 0, hi = 1;      // colour scale range
};

// Fills lo/hi from the finite values (hi > lo always).
void fit_range(HeatmapGrid& grid);
// Rows top to bottom, `alpha` applied to every pixel.
std::vector<uint8_t> heat_pixels(const HeatmapGrid& grid, uint8_t alpha = 255);

struct HeatmapHit {
  int row = 0, col = 0;
  bool clicked = false;
};

// Draws `texture` (made from `grid`) up to `display_width` pixels wide (thin grids stretched to a readable
// height, tall ones shrunk), then a colour scale bar labelled
// lo..hi with `unit`. `mark` outlines one cell. Returns the hovered cell.
std::optional<HeatmapHit> draw_heatmap(const GlTexture& texture, const HeatmapGrid& grid, float display_width,
                                       const std::string& unit, std::optional<std::pair<int, int>> mark);
// The colour scale bar alone (used under image overlays).
void draw_colour_scale(double lo, double hi, const std::string& unit, float width);

}  // namespace lab::viewer
