// The Train panel's plots: a series over iterations (ImGui's line plot, its latest value and range in the
// overlay) and the per-layer gradient norms as bars sorted by size on a log scale, the layer's name and norm
// in a tooltip on hover.
#pragma once
#include <string>
#include <utility>
#include <vector>

namespace lab::viewer {

// One line plot of `values` (oldest first), `height` pixels tall, the full width of the panel.
void draw_series(const std::string& label, const std::vector<float>& values, float height);

// Bars of the norms, largest first, on a log10 scale from the smallest positive norm to the largest; zero
// norms sit at the bottom. `height` pixels tall, the full width of the panel.
void draw_gradient_bars(const std::vector<std::pair<std::string, double>>& norms, float height);

}  // namespace lab::viewer
