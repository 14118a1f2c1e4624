// Line plots through ImGui::PlotLines; the gradient-norm bars drawn on the window's draw list over an
// invisible button that gives them a place in the layout and the hover test.
#include "viewer/train_plots.hpp"

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstdio>

#include <imgui.h>

#include "viewer/ui_text.hpp"

namespace lab::viewer {

void draw_series(const std::string& label, const std::vector<float>& values, float height) {
  char overlay[160];
  if (values.empty()) {
    std::snprintf(overlay, sizeof overlay, "%s: no steps yet", label.c_str());
  } else {
    const auto [lo, hi] = std::minmax_element(values.begin(), values.end());
    std::snprintf(overlay, sizeof overlay, "%s %.4g (range %.3g .. %.3g)", label.c_str(), values.back(), *lo,
                  *hi);
  }
  ui_record(overlay);
  ImGui::PlotLines(("##" + label).c_str(), values.data(), static_cast<int>(values.size()), 0, overlay,
                   FLT_MAX, FLT_MAX, ImVec2(ImGui::GetContentRegionAvail().x, height));
}

void draw_gradient_bars(const std::vector<std::pair<std::string, double>>& norms, float height) {
  if (norms.empty()) {
    ImGui::TextDisabled("gradient norms: after the first step");
    return;
  }
  std::vector<std::pair<std::string, double>> sorted = norms;
  std::stable_sort(sorted.begin(), sorted.end(),
                   [](const auto& a, const auto& b) { return a.second > b.second; });
  double smallest = sorted.front().second;
  for (const auto& [name, norm] : sorted)
    if (norm > 0) smallest = std::min(smallest, norm);
  const double top = std::log10(std::max(sorted.front().second, 1e-30));
  const double bottom = std::log10(std::max(smallest, 1e-30)) - 0.5;  // the smallest bar stays visible
  char caption[160];
  std::snprintf(caption, sizeof caption, "gradient L2 norm per layer (%zu layers, log scale %.2e .. %.2e)",
                sorted.size(), smallest, sorted.front().second);
  ui_text(caption);

  const float width = ImGui::GetContentRegionAvail().x;
  const ImVec2 origin = ImGui::GetCursorScreenPos();
  ImGui::InvisibleButton("gradient bars", ImVec2(width, height));
  const bool hovered = ImGui::IsItemHovered();
  ImDrawList* draw = ImGui::GetWindowDrawList();
  draw->AddRectFilled(origin, ImVec2(origin.x + width, origin.y + height), IM_COL32(30, 30, 36, 255));
  const float bar = width / static_cast<float>(sorted.size());
  const float mouse_x = ImGui::GetMousePos().x;
  for (size_t i = 0; i < sorted.size(); ++i) {
    const double value = sorted[i].second > 0 ? std::log10(sorted[i].second) : bottom;
    const double fraction = top > bottom ? (value - bottom) / (top - bottom) : 1.0;
    const float x0 = origin.x + bar * static_cast<float>(i), x1 = x0 + std::max(bar - 1, 1.0f);
    const float y0 = origin.y + height * static_cast<float>(1 - std::clamp(fraction, 0.0, 1.0));
    const bool under_mouse = hovered && mouse_x >= x0 && mouse_x < x0 + bar;
    draw->AddRectFilled(ImVec2(x0, y0), ImVec2(x1, origin.y + height),
                        under_mouse ? IM_COL32(255, 210, 80, 255) : IM_COL32(90, 160, 240, 255));
    if (under_mouse) ImGui::SetTooltip("%s: %.4e", sorted[i].first.c_str(), sorted[i].second);
  }
  ui_record("largest: " + sorted.front().first);
}

}  // namespace lab::viewer
