// The Run panel: the selected kernel's parameters (from its ParamSpecs), seed and backend; Run executes it in
// a child process and shows time, per-output metrics against the CPU reference and PASS/FAIL, a failure
// paragraph for faults, and the |out - ref| heatmap per 2-D slice with the worst element.
#include <algorithm>
#include <cmath>
#include <cstdio>

#include <imgui.h>
#include <imgui_stdlib.h>

#include "viewer/diff_slices.hpp"
#include "viewer/panels.hpp"
#include "viewer/ui_text.hpp"
#include "viewer/viewer_actions.hpp"

namespace lab::viewer {

namespace {

const ImVec4 kRed(1.0f, 0.35f, 0.35f, 1.0f);
const ImVec4 kGreen(0.3f, 0.95f, 0.3f, 1.0f);

std::string sci(double v) {
  char text[32];
  std::snprintf(text, sizeof text, "%.3e", v);
  return text;
}

std::string shape_text(const std::vector<size_t>& shape) {
  std::string out = "[";
  for (size_t i = 0; i < shape.size(); ++i) out += (i ? ", " : "") + std::to_string(shape[i]);
  return out + "]";
}

void draw_param(ViewerState& s, const ParamSpec& p) {
  std::string& value = s.run.params[p.name];
  ImGui::PushID(p.name.c_str());
  ImGui::SetNextItemWidth(150);
  if (p.kind == ParamSpec::Kind::Bool) {
    bool b = value == "true" || value == "1";
    if (ImGui::Checkbox(p.name.c_str(), &b)) value = b ? "true" : "false";
  } else if (!p.choices.empty()) {
    if (ImGui::BeginCombo(p.name.c_str(), value.c_str())) {
      for (const std::string& c : p.choices)
        if (ImGui::Selectable(c.c_str(), c == value)) value = c;
      ImGui::EndCombo();
    }
  } else {
    ImGui::InputText(p.name.c_str(), &value);
  }
  if (ImGui::IsItemHovered()) {
    const std::string rule = p.help + "\ndefault " + p.default_value + ", " + param_rule(p);
    ImGui::SetTooltip("%s", rule.c_str());
  }
  ImGui::PopID();
}

void draw_controls(ViewerState& s) {
  const Runner& r = *s.kernels.runner;
  ui_text(r.name() + " / " + s.kernels.variant);
  ImGui::TextDisabled("%s", r.description().c_str());
  if (!s.run.scenario_case.empty()) ImGui::TextDisabled("case: %s", s.run.scenario_case.c_str());
  ImGui::Separator();
  for (const ParamSpec& p : r.params()) draw_param(s, p);
  ImGui::SetNextItemWidth(150);
  ImGui::InputInt("seed", &s.run.seed);
  ImGui::SetNextItemWidth(150);
  if (ImGui::BeginCombo("backend", s.run.backend.c_str())) {
    for (const std::string& b : s.backends)
      if (ImGui::Selectable(b.c_str(), b == s.run.backend)) s.run.backend = s.settings.backend = b;
    ImGui::EndCombo();
  }
  if (s.run.tolerance)
    ImGui::TextDisabled("tolerance: rel_l2 %.1e, max_abs %.1e", s.run.tolerance->rel_l2,
                        s.run.tolerance->max_abs);
  ImGui::BeginDisabled(s.run.job.valid());
  if (ImGui::Button(s.run.job.valid() ? "Running ..." : "Run", ImVec2(150, 0))) {
    try {
      start_run(s);
      s.message.clear();
    } catch (const std::exception& e) {
      s.message = e.what();
    }
  }
  ImGui::EndDisabled();
  if (ImGui::Button("Reset parameters", ImVec2(150, 0)))
    for (const ParamSpec& p : r.params()) s.run.params[p.name] = p.default_value;
}

void draw_checks_table(ViewerState& s, const RunOutcome& o) {
  if (!ImGui::BeginTable("checks", 8, ImGuiTableFlags_Borders | ImGuiTableFlags_RowBg)) return;
  for (const char* h :
       {"output", "shape", "max_abs", "max_rel", "rel_l2", "non-finite", "tolerance", "verdict"})
    ImGui::TableSetupColumn(h);
  ImGui::TableHeadersRow();
  for (size_t i = 0; i < o.checks.size(); ++i) {
    const OutputCheck& c = o.checks[i];
    ImGui::TableNextRow();
    ImGui::TableSetColumnIndex(0);
    if (ImGui::Selectable(c.output.c_str(), s.run.output_index == static_cast<int>(i),
                          ImGuiSelectableFlags_SpanAllColumns)) {
      s.run.output_index = static_cast<int>(i);
      s.run.slice = 0;
      s.run.heatmap_dirty = true;
    }
    const std::string cells[] = {
        shape_text(c.shape),
        sci(c.metrics.max_abs),
        sci(c.metrics.max_rel),
        sci(c.metrics.rel_l2),
        std::to_string(c.metrics.non_finite) + " of " + std::to_string(c.metrics.count),
        sci(c.tolerance.rel_l2) + ", " + sci(c.tolerance.max_abs)};
    for (int col = 1; col <= 6; ++col) {
      ImGui::TableSetColumnIndex(col);
      ui_text(cells[col - 1]);
    }
    ImGui::TableSetColumnIndex(7);
    ui_text_coloured(c.pass ? kGreen : kRed, c.pass ? "PASS" : "FAIL");
  }
  ImGui::EndTable();
}

void draw_heatmap_of(ViewerState& s, const OutputCheck& c) {
  if (c.out.empty()) {
    ImGui::TextDisabled("%s: too large to keep its arrays; metrics only", c.output.c_str());
    return;
  }
  const SliceLayout layout = slice_layout(c);
  size_t worst_slice = 0, worst_row = 0, worst_col = 0;
  locate(layout, c.metrics.worst_index, worst_slice, worst_row, worst_col);
  if (layout.slices > 1) {
    ImGui::SetNextItemWidth(300);
    if (ImGui::SliderInt("slice", &s.run.slice, 0, static_cast<int>(layout.slices) - 1))
      s.run.heatmap_dirty = true;
    ImGui::SameLine();
  }
  if (ImGui::Button("go to worst")) {
    s.run.slice = static_cast<int>(worst_slice);
    s.run.heatmap_dirty = true;
  }
  s.run.slice = std::clamp(s.run.slice, 0, static_cast<int>(std::max<size_t>(1, layout.slices)) - 1);
  if (s.run.heatmap_dirty) {
    s.run.grid = diff_grid(c, layout, static_cast<size_t>(s.run.slice));
    s.run.texture.upload(heat_pixels(s.run.grid), s.run.grid.cols, s.run.grid.rows);
    s.run.heatmap_dirty = false;
  }
  ui_text("worst element [" + std::to_string(c.metrics.worst_index) + "] (slice " +
          std::to_string(worst_slice) + ", row " + std::to_string(worst_row) + ", col " +
          std::to_string(worst_col) + "): out " + sci(c.metrics.worst_out) + ", ref " +
          sci(c.metrics.worst_ref));
  ImGui::TextDisabled("|out - ref| of %s, slice %d of %zu (%zu x %zu); %s", c.output.c_str(), s.run.slice,
                      layout.slices, layout.rows, layout.cols, layout.note.c_str());
  std::optional<std::pair<int, int>> mark;
  if (worst_slice == static_cast<size_t>(s.run.slice))
    mark = std::pair<int, int>(static_cast<int>(worst_row / layout.row_step),
                               static_cast<int>(worst_col / layout.col_step));
  const float width = std::min(ImGui::GetContentRegionAvail().x, 900.0f);
  if (const auto hit = draw_heatmap(s.run.texture, s.run.grid, width, "|out - ref|", mark)) {
    const size_t i = element_of_cell(c, layout, static_cast<size_t>(s.run.slice), hit->row, hit->col);
    size_t sl = 0, row = 0, col = 0;
    locate(layout, i, sl, row, col);
    ImGui::SetTooltip("[%zu] slice %zu, row %zu, col %zu\nout %.6g\nref %.6g\n|diff| %.3e", i, sl, row, col,
                      c.out[i], c.ref[i], std::abs(static_cast<double>(c.out[i]) - c.ref[i]));
  }
}

void draw_result(ViewerState& s) {
  if (s.run.job.valid()) {
    ui_text("running " + s.kernels.runner->name() + " on " + s.run.backend + " ...");
    return;
  }
  if (!s.run.result) {
    ImGui::TextDisabled(
        "Press Run: the kernel runs in a child process and is checked against the CPU reference.");
    return;
  }
  const RunOutcome& o = *s.run.result;
  if (!o.ran) {
    ui_text_coloured(kRed, "ERROR");
    ui_text_wrapped(o.failure);
    if (!o.diagnostics.empty() && ImGui::Button("Show the errors in the Kernels panel"))
      jump_to_diagnostic(s, o.diagnostics.front());
    return;
  }
  ImGui::SetWindowFontScale(2.0f);
  ui_text_coloured(o.pass ? kGreen : kRed, o.pass ? "PASS" : "FAIL");
  ImGui::SetWindowFontScale(1.0f);
  char line[256];
  std::snprintf(line, sizeof line, "time %.4f ms on %s (%s)", o.time_ms, s.run.backend.c_str(),
                o.device.c_str());
  ui_text(line);
  draw_checks_table(s, o);
  if (o.checks.empty()) return;
  s.run.output_index = std::clamp(s.run.output_index, 0, static_cast<int>(o.checks.size()) - 1);
  ImGui::Separator();
  draw_heatmap_of(s, o.checks[static_cast<size_t>(s.run.output_index)]);
}

}  // namespace

void draw_run_panel(ViewerState& s) {
  if (!s.kernels.runner) {
    ui_text("Pick a kernel in the Kernels panel first.");
    return;
  }
  ImGui::BeginChild("controls", ImVec2(330, 0), true);
  draw_controls(s);
  ImGui::EndChild();
  ImGui::SameLine();
  ImGui::BeginChild("result", ImVec2(0, 0), true, ImGuiWindowFlags_HorizontalScrollbar);
  draw_result(s);
  ImGui::EndChild();
}

}  // namespace lab::viewer
