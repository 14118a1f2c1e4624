// The Train panel: the dataset YAML, model and settings, Start / Pause / Resume / Stop of a training run on a
// worker thread (viewer/train_session), live curves of the loss components, the learning rate per parameter
// group and the gradient norm, the per-layer gradient norms of the latest step (sorted bars, log scale, the
// layer on hover), and the assignment view: an image of the dataset with each ground-truth box and its
// positive anchors (one-to-many: dots, one-to-one: rings) in the box's colour, from the current weights.
#include <algorithm>
#include <cstdio>

#include <imgui.h>
#include <imgui_stdlib.h>

#include "pipeline/image/draw.hpp"
#include "viewer/panels.hpp"
#include "viewer/train_actions.hpp"
#include "viewer/train_plots.hpp"
#include "viewer/requested_tab.hpp"
#include "viewer/ui_text.hpp"
#include "viewer/viewer_actions.hpp"

namespace lab::viewer {

namespace {

const ImVec4 kRed(1.0f, 0.35f, 0.35f, 1.0f);

bool active(TrainPhase phase) {
  return phase == TrainPhase::starting || phase == TrainPhase::running || phase == TrainPhase::paused;
}

// A whole-number setting of at least 1.
void int_setting(const char* label, int& value) {
  ImGui::SetNextItemWidth(120);
  ImGui::InputInt(label, &value);
  value = std::max(value, 1);
}

void draw_controls(ViewerState& s) {
  TrainState& t = s.train;
  TrainRequest& r = t.request;
  const bool running = active(t.progress.phase);
  ImGui::BeginDisabled(running);
  ImGui::TextUnformatted("dataset YAML");
  ImGui::SetNextItemWidth(-1);
  ImGui::InputText("##data", &r.data_yaml);
  ImGui::TextUnformatted("model (empty: the default yolo26n)");
  ImGui::SetNextItemWidth(-1);
  ImGui::InputText("##model", &r.model);
  int_setting("epochs", r.epochs);
  int_setting("batch", r.batch);
  int_setting("imgsz", r.imgsz);
  int_setting("nominal batch", r.nbs);
  ImGui::SetNextItemWidth(120);
  if (ImGui::BeginCombo("backend", r.backend.c_str())) {
    std::vector<std::string> choices = s.backends;
    choices.push_back("reference");
    for (const std::string& b : choices)
      if (ImGui::Selectable(b.c_str(), b == r.backend)) r.backend = b;
    ImGui::EndCombo();
  }
  ImGui::EndDisabled();
  int_setting("assignment every N iterations", r.assignment_every);

  ImGui::BeginDisabled(running);
  if (ImGui::Button("Start", ImVec2(80, 0))) guarded(s, start_training);
  ImGui::EndDisabled();
  ImGui::SameLine();
  ImGui::BeginDisabled(!running || t.progress.stop_requested);
  if (t.progress.phase == TrainPhase::paused) {
    if (ImGui::Button("Resume", ImVec2(80, 0))) guarded(s, resume_training);
  } else if (ImGui::Button("Pause", ImVec2(80, 0))) {
    guarded(s, pause_training);
  }
  ImGui::SameLine();
  if (ImGui::Button("Stop", ImVec2(80, 0))) guarded(s, stop_training);
  ImGui::EndDisabled();

  const TrainProgress& p = t.progress;
  std::string status = std::string("training: ") + train_phase_name(p.phase);
  if (p.stop_requested && active(p.phase)) status += " (stopping after this iteration)";
  if (p.pause_requested && p.phase == TrainPhase::running) status += " (pausing after this iteration)";
  if (!p.steps.empty()) {
    const TrainStepRecord& last = p.steps.back();
    status += ", epoch " + std::to_string(last.epoch + 1) + "/" + std::to_string(p.epochs) + ", iteration " +
              std::to_string(last.iteration + 1);
  }
  ui_text(status);
  if (p.phase == TrainPhase::failed) ui_text_coloured(kRed, "training failed: " + p.failure);
  if (!p.epoch_reports.empty() && p.epoch_reports.back().validated) {
    const train::EpochReport& e = p.epoch_reports.back();
    char line[160];
    std::snprintf(line, sizeof line, "epoch %d val: P %.3f, R %.3f", e.epoch + 1, e.metrics.precision,
                  e.metrics.recall);
    ui_text(line);
    std::snprintf(line, sizeof line, "  mAP50 %.3f, mAP50-95 %.3f", e.metrics.map50, e.metrics.map50_95);
    ui_text(line);
  }
  if (!p.folder.empty()) ui_text_wrapped("run folder: " + p.folder);
  if (!p.log.empty() && ImGui::CollapsingHeader("log")) {
    for (const std::string& line : p.log) ui_text_wrapped(line);
  }

  ImGui::Separator();
  ImGui::BeginDisabled(p.assignment_pending);
  if (ImGui::Button(p.assignment_pending ? "Assigning ..." : "Refresh assignment"))
    guarded(s, refresh_assignment);
  ImGui::EndDisabled();
  ImGui::Checkbox("one-to-many positives (dots)", &t.show_one2many);
  ImGui::Checkbox("one-to-one positives (rings)", &t.show_one2one);
  if (!p.assignment_failure.empty()) ui_text_coloured(kRed, "assignment failed: " + p.assignment_failure);
}

void draw_curves(ViewerState& s) {
  const TrainState& t = s.train;
  ImGui::BeginChild("curves", ImVec2(0, ImGui::GetContentRegionAvail().y * 0.62f));
  for (const auto& [name, values] : t.curves) draw_series(name, values, 46);
  if (t.curves.empty())
    ImGui::TextDisabled("Start a run: its loss components, learning rates and norms appear here.");
  ImGui::EndChild();
  draw_gradient_bars(t.progress.module_norms, std::max(ImGui::GetContentRegionAvail().y - 30, 80.0f));
}

// The image, each box in its colour (the detection palette by box index) and its positives; a tooltip names
// the anchor under the mouse.
void draw_assignment_image(TrainState& t, const AssignmentSnapshot& a, float max_w, float max_h) {
  const train::AssignmentView& v = a.view;
  if (t.texture_serial != a.serial) {
    t.image_texture.upload(rgba_from_rgb(a.rgb), v.width, v.height, false);
    t.texture_serial = a.serial;
  }
  const float scale = std::min(max_w / v.width, max_h / v.height);
  const ImVec2 origin = ImGui::GetCursorScreenPos();
  t.image_x = origin.x, t.image_y = origin.y, t.image_scale = scale;
  ImGui::Image(t.image_texture.imgui_id(), ImVec2(v.width * scale, v.height * scale));
  const bool hovered = ImGui::IsItemHovered();
  const ImVec2 mouse = ImGui::GetMousePos();
  ImDrawList* draw = ImGui::GetWindowDrawList();
  const auto at = [&](double x, double y) { return ImVec2(origin.x + x * scale, origin.y + y * scale); };
  const train::PositiveAnchor* under_mouse = nullptr;
  size_t under_box = 0;
  for (size_t i = 0; i < v.boxes.size(); ++i) {
    const train::BoxAssignment& b = v.boxes[i];
    const Rgb c = class_colour(static_cast<int>(i));
    const ImU32 colour = IM_COL32(c[0], c[1], c[2], 255);
    draw->AddRect(at(b.box.x1, b.box.y1), at(b.box.x2, b.box.y2), colour, 0, 0, 2);
    const auto mark = [&](const train::PositiveAnchor& p, bool ring) {
      const ImVec2 centre = at(p.x, p.y);
      const float radius = std::max(2.5f, 0.18f * p.stride * scale);
      if (ring) {
        draw->AddCircle(centre, radius * 1.9f, IM_COL32(255, 255, 255, 255), 16, 3.5f);
        draw->AddCircle(centre, radius * 1.9f, colour, 16, 2);
      } else {
        draw->AddCircleFilled(centre, radius, colour, 12);
        draw->AddCircle(centre, radius, IM_COL32(0, 0, 0, 200), 12, 1);
      }
      const float dx = mouse.x - centre.x, dy = mouse.y - centre.y;
      if (hovered && dx * dx + dy * dy <= radius * radius * 4) under_mouse = &p, under_box = i;
    };
    if (t.show_one2many)
      for (const train::PositiveAnchor& p : b.one2many) mark(p, false);
    if (t.show_one2one)
      for (const train::PositiveAnchor& p : b.one2one) mark(p, true);
  }
  if (under_mouse)
    ImGui::SetTooltip(
        "box %zu: anchor %d, level P%d (stride %d) at (%.0f, %.0f)\nalign %.3g, overlap %.3f, "
        "target score %.3g",
        under_box, under_mouse->anchor, under_mouse->level + 3, under_mouse->stride, under_mouse->x,
        under_mouse->y, under_mouse->align, under_mouse->overlap, under_mouse->score);
}

void draw_assignment_table(const AssignmentSnapshot& a) {
  const train::AssignmentView& v = a.view;
  ui_text("positives: " + std::to_string(v.one2many_positives) + " one-to-many, " +
          std::to_string(v.one2one_positives) + " one-to-one");
  if (!ImGui::BeginTable("boxes", 5,
                         ImGuiTableFlags_Borders | ImGuiTableFlags_RowBg | ImGuiTableFlags_ScrollY))
    return;
  ImGui::TableSetupColumn("box");
  ImGui::TableSetupColumn("class");
  ImGui::TableSetupColumn("o2m");
  ImGui::TableSetupColumn("o2o");
  ImGui::TableSetupColumn("best overlap");
  ImGui::TableHeadersRow();
  for (size_t i = 0; i < v.boxes.size(); ++i) {
    const train::BoxAssignment& b = v.boxes[i];
    double best = 0;
    for (const train::PositiveAnchor& p : b.one2many) best = std::max(best, p.overlap);
    const Rgb c = class_colour(static_cast<int>(i));
    ImGui::TableNextRow();
    ImGui::TableSetColumnIndex(0);
    ImGui::TextColored(ImVec4(c[0] / 255.0f, c[1] / 255.0f, c[2] / 255.0f, 1), "%zu", i);
    ImGui::TableSetColumnIndex(1);
    ImGui::Text("%d", b.box.cls);
    ImGui::TableSetColumnIndex(2);
    ImGui::Text("%zu", b.one2many.size());
    ImGui::TableSetColumnIndex(3);
    ImGui::Text("%zu", b.one2one.size());
    ImGui::TableSetColumnIndex(4);
    ImGui::Text("%.3f", best);
  }
  ImGui::EndTable();
}

void draw_assignment(ViewerState& s) {
  TrainState& t = s.train;
  const std::shared_ptr<const AssignmentSnapshot>& a = t.progress.assignment;
  if (!a) {
    ImGui::TextDisabled(
        "The assignment of a dataset image appears with the first step, every N steps after, or "
        "on Refresh assignment.");
    return;
  }
  ui_text(a->image_file + ", " + std::to_string(a->view.width) + "x" + std::to_string(a->view.height) +
          " input, weights: " + a->weights);
  const ImVec2 avail = ImGui::GetContentRegionAvail();
  draw_assignment_image(t, *a, avail.x - 330, avail.y - 10);
  ImGui::SameLine();
  ImGui::BeginChild("assignment table", ImVec2(0, 0));
  draw_assignment_table(*a);
  ImGui::EndChild();
}

}  // namespace

void draw_train_panel(ViewerState& s) {
  TrainState& t = s.train;
  ImGui::BeginChild("train controls", ImVec2(360, 0), true);
  draw_controls(s);
  ImGui::EndChild();
  ImGui::SameLine();
  ImGui::BeginChild("train views", ImVec2(0, 0), true);
  if (ImGui::BeginTabBar("train tabs")) {
    const auto tab = [&](const char* label, const char* key) {
      return begin_requested_tab(label, key, t.tab);
    };
    if (tab("Curves and gradients", "curves")) {
      draw_curves(s);
      ImGui::EndTabItem();
    }
    if (tab("Assignment", "assignment")) {
      draw_assignment(s);
      ImGui::EndTabItem();
    }
    ImGui::EndTabBar();
  }
  ImGui::EndChild();
}

}  // namespace lab::viewer
