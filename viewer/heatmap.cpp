// Colour map, grid pixels and the heatmap widget.
#include "viewer/heatmap.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include <imgui.h>

namespace lab::viewer {

std::array<uint8_t, 4> heat_colour(double t) {
  // Piecewise-linear through dark blue, purple, orange, yellow (perceptually ordered, readable on dark UI).
  static constexpr double stops[5][3] = {
      {0.05, 0.03, 0.25}, {0.35, 0.05, 0.55}, {0.80, 0.20, 0.35}, {0.98, 0.55, 0.10}, {0.99, 0.95, 0.35}};
  t = std::clamp(std::isfinite(t) ? t : 0.0, 0.0, 1.0) * 4.0;
  const int i = std::min(3, static_cast<int>(t));
  const double f = t - i;
  std::array<uint8_t, 4> out{};
  for (int c = 0; c < 3; ++c)
    out[c] = static_cast<uint8_t>(255.0 * (stops[i][c] + f * (stops[i + 1][c] - stops[i][c])));
  out[3] = 255;
  return out;
}

void fit_range(HeatmapGrid& grid) {
  double lo = INFINITY, hi = -INFINITY;
  for (float v : grid.values)
    if (std::isfinite(v)) {
      lo = std::min(lo, static_cast<double>(v));
      hi = std::max(hi, static_cast<double>(v));
    }
  if (!std::isfinite(lo)) lo = hi = 0;
  if (hi <= lo) hi = lo + (lo == 0 ? 1 : std::abs(lo) * 1e-6);
  grid.lo = lo;
  grid.hi = hi;
}

std::vector<uint8_t> heat_pixels(const HeatmapGrid& grid, uint8_t alpha) {
  std::vector<uint8_t> px(static_cast<size_t>(grid.rows) * grid.cols * 4);
  for (size_t i = 0; i < grid.values.size() && i * 4 < px.size(); ++i) {
    const float v = grid.values[i];
    const auto c = std::isfinite(v) ? heat_colour((v - grid.lo) / (grid.hi - grid.lo)) : kNonFiniteColour;
    std::copy(c.begin(), c.end(), px.begin() + i * 4);
    px[i * 4 + 3] = alpha;
  }
  return px;
}

void draw_colour_scale(double lo, double hi, const std::string& unit, float width) {
  ImDrawList* draw = ImGui::GetWindowDrawList();
  const ImVec2 p = ImGui::GetCursorScreenPos();
  const float bar_h = 12;
  const int steps = 64;
  for (int i = 0; i < steps; ++i) {
    const auto c = heat_colour((i + 0.5) / steps);
    draw->AddRectFilled(ImVec2(p.x + width * i / steps, p.y),
                        ImVec2(p.x + width * (i + 1) / steps, p.y + bar_h), IM_COL32(c[0], c[1], c[2], 255));
  }
  ImGui::Dummy(ImVec2(width, bar_h));
  char lo_text[32], hi_text[32];
  std::snprintf(lo_text, sizeof lo_text, "%.3g", lo);
  std::snprintf(hi_text, sizeof hi_text, "%.3g", hi);
  ImGui::TextUnformatted(lo_text);
  ImGui::SameLine(std::max(0.0f, width - ImGui::CalcTextSize(hi_text).x));
  ImGui::TextUnformatted(hi_text);
  if (!unit.empty()) ImGui::TextDisabled("%s (magenta: NaN/Inf)", unit.c_str());
}

std::optional<HeatmapHit> draw_heatmap(const GlTexture& texture, const HeatmapGrid& grid, float display_width,
                                       const std::string& unit, std::optional<std::pair<int, int>> mark) {
  if (texture.empty() || grid.rows == 0 || grid.cols == 0) return std::nullopt;
  // Square cells where they fit in [kMinHeight, kMaxHeight]; thin grids get taller cells.
  constexpr float kMinHeight = 120, kMaxHeight = 520;
  float cell_w = display_width / grid.cols, cell_h = cell_w;
  if (cell_h * grid.rows > kMaxHeight) cell_w = cell_h = kMaxHeight / grid.rows;
  if (cell_h * grid.rows < kMinHeight) cell_h = kMinHeight / grid.rows;
  const ImVec2 size(cell_w * grid.cols, cell_h * grid.rows);
  const ImVec2 origin = ImGui::GetCursorScreenPos();
  ImGui::Image(texture.imgui_id(), size);
  std::optional<HeatmapHit> hit;
  if (ImGui::IsItemHovered()) {
    const ImVec2 m = ImGui::GetMousePos();
    const int col = std::clamp(static_cast<int>((m.x - origin.x) / cell_w), 0, grid.cols - 1);
    const int row = std::clamp(static_cast<int>((m.y - origin.y) / cell_h), 0, grid.rows - 1);
    hit = HeatmapHit{row, col, ImGui::IsMouseClicked(ImGuiMouseButton_Left)};
  }
  if (mark) {
    const auto [r, c] = *mark;
    const float pad = 3;
    ImGui::GetWindowDrawList()->AddRect(
        ImVec2(origin.x + c * cell_w - pad, origin.y + r * cell_h - pad),
        ImVec2(origin.x + (c + 1) * cell_w + pad, origin.y + (r + 1) * cell_h + pad),
        IM_COL32(0, 255, 255, 255), 0, 0, 2);
  }
  draw_colour_scale(grid.lo, grid.hi, unit, std::min(size.x, 320.0f));
  return hit;
}

}  // namespace lab::viewer
