// The Pipeline panel: open an image (path field or drag and drop), run YOLO26 on an executor, the image with
// boxes, class names and scores filtered live by a confidence slider, the per-layer time table, the per-layer
// error against the CPU reference, a feature-map view (layer, channel) and the attention view (block, head,
// click a pixel: that query's attention over the key grid, overlaid on the image and shown beside it).
#include <algorithm>
#include <cmath>
#include <cstdio>

#include <imgui.h>
#include <imgui_stdlib.h>

#include "viewer/panels.hpp"
#include "pipeline/detect/detector.hpp"
#include "pipeline/image/draw.hpp"
#include "viewer/requested_tab.hpp"
#include "viewer/ui_text.hpp"
#include "viewer/viewer_actions.hpp"

namespace lab::viewer {

namespace {

const ImVec4 kRed(1.0f, 0.35f, 0.35f, 1.0f);

void draw_controls(ViewerState& s) {
  PipelineState& p = s.pipeline;
  ImGui::TextUnformatted("image (or drop a file on the window)");
  ImGui::SetNextItemWidth(-60);
  const bool enter = ImGui::InputText("##image", &p.image_path, ImGuiInputTextFlags_EnterReturnsTrue);
  ImGui::SameLine();
  if (ImGui::Button("Open") || enter) {
    try {
      open_image(s, p.image_path);
      s.message.clear();
    } catch (const std::exception& e) {
      s.message = e.what();
    }
  }
  ImGui::SetNextItemWidth(150);
  if (ImGui::BeginCombo("executor", p.executor.c_str())) {
    for (const std::string& e : available_executors())
      if (ImGui::Selectable(e.c_str(), e == p.executor)) p.executor = e;
    ImGui::EndCombo();
  }
  ImGui::BeginDisabled(p.job.valid());
  if (ImGui::Button(p.job.valid() ? "Running YOLO26 ..." : "Run YOLO26", ImVec2(200, 0)))
    guarded(s, start_pipeline);
  ImGui::EndDisabled();
  ImGui::Checkbox("re-run when a kernel is saved", &p.rerun_on_save);
  ImGui::SetNextItemWidth(200);
  if (ImGui::SliderFloat("confidence", &p.confidence, 0.01f, 1.0f, "%.2f"))
    s.settings.confidence = p.confidence;
  if (!p.failure.empty()) {
    ui_text_coloured(kRed, "pipeline failed");
    ui_text_wrapped(p.failure);
    if (p.run) ui_text("shown: the last run that succeeded");
  }
  if (!p.run) return;
  const PipelineRun& r = *p.run;
  ImGui::TextDisabled("model: %s (%s)", r.model_path.c_str(), r.model_origin.c_str());
  char line[160];
  std::snprintf(line, sizeof line, "forward %.1f ms on %s, input %dx%d (h x w)", r.forward_ms,
                r.executor.c_str(), r.geometry.height, r.geometry.width);
  ui_text(line);
  if (ImGui::CollapsingHeader("per-layer time", ImGuiTreeNodeFlags_DefaultOpen) &&
      ImGui::BeginTable("times", 2, ImGuiTableFlags_Borders | ImGuiTableFlags_RowBg | ImGuiTableFlags_ScrollY,
                        ImVec2(0, 220))) {
    ImGui::TableSetupColumn("layer");
    ImGui::TableSetupColumn("ms");
    ImGui::TableHeadersRow();
    for (const LayerTime& t : r.layer_times) {
      ImGui::TableNextRow();
      ImGui::TableSetColumnIndex(0);
      ImGui::TextUnformatted(t.name.c_str());
      ImGui::TableSetColumnIndex(1);
      ImGui::Text("%.3f", t.ms);
    }
    ImGui::EndTable();
  }
  if (ImGui::CollapsingHeader("error against the CPU reference", ImGuiTreeNodeFlags_DefaultOpen)) {
    ImGui::BeginDisabled(p.compare_job.valid() || !runs_our_kernels(r.executor));
    if (ImGui::Button(p.compare_job.valid() ? "Comparing ..." : "Compare every layer")) {
      guarded(s, start_reference_comparison);
    }
    ImGui::EndDisabled();
    if (!p.compare_failure.empty()) ui_text_coloured(kRed, p.compare_failure);
    if (!p.layer_errors.empty()) ui_text_wrapped(comparison_summary(p.layer_errors));
    if (!p.layer_errors.empty() &&
        ImGui::BeginTable("errors", 3,
                          ImGuiTableFlags_Borders | ImGuiTableFlags_RowBg | ImGuiTableFlags_ScrollY,
                          ImVec2(0, 260))) {
      ImGui::TableSetupColumn("tensor");
      ImGui::TableSetupColumn("rel_l2");
      ImGui::TableSetupColumn("max_abs");
      ImGui::TableHeadersRow();
      for (const LayerError& e : p.layer_errors) {
        ImGui::TableNextRow();
        ImGui::TableSetColumnIndex(0);
        ui_text(e.name);
        ImGui::TableSetColumnIndex(1);
        ImGui::TextColored(e.rel_l2 <= kLayerErrorBar ? ImGui::GetStyleColorVec4(ImGuiCol_Text) : kRed,
                           "%.2e", e.rel_l2);
        ImGui::TableSetColumnIndex(2);
        ImGui::Text("%.2e", e.max_abs);
      }
      ImGui::EndTable();
    }
  }
}

void refresh_attention(PipelineState& p) {
  const PipelineRun& r = *p.run;
  if (!p.attention_dirty || r.attentions.empty() || !p.query) return;
  p.attention_dirty = false;
  p.attention_index = std::clamp(p.attention_index, 0, static_cast<int>(r.attentions.size()) - 1);
  const AttentionMapInfo& a = r.attentions[static_cast<size_t>(p.attention_index)];
  p.head = std::clamp(p.head, 0, a.heads - 1);
  const double lx = p.query->first * r.geometry.ratio + r.geometry.left;
  const double ly = p.query->second * r.geometry.ratio + r.geometry.top;
  const int gx = std::clamp(static_cast<int>(lx / a.stride), 0, a.grid_w - 1);
  const int gy = std::clamp(static_cast<int>(ly / a.stride), 0, a.grid_h - 1);
  const size_t q = static_cast<size_t>(gy) * a.grid_w + gx;
  const NamedTensor& t = r.tensor(a.name);
  const size_t n = static_cast<size_t>(a.tokens);
  const size_t row = (static_cast<size_t>(p.head) * n + q) * n;
  p.attention_grid.rows = a.grid_h;
  p.attention_grid.cols = a.grid_w;
  p.attention_grid.values.assign(t.values.begin() + static_cast<long>(row),
                                 t.values.begin() + static_cast<long>(row + n));
  fit_range(p.attention_grid);
  p.attention_grid.lo = 0;
  p.attention_texture.upload(heat_pixels(p.attention_grid), a.grid_w, a.grid_h, false);
}

// The image with the attention overlay and the boxes; a click picks the query pixel.
void draw_image_view(ViewerState& s, float max_w, float max_h) {
  PipelineState& p = s.pipeline;
  const Image& img = p.run ? p.run->image : p.preview;
  if (img.width == 0) {
    ImGui::TextDisabled("Open an image, then Run YOLO26.");
    return;
  }
  if (p.image_dirty) {
    p.image_texture.upload(rgba_from_rgb(img.rgb), img.width, img.height, true);
    p.image_dirty = false;
  }
  if (p.run) {
    const auto shown = std::count_if(p.run->detections.begin(), p.run->detections.end(),
                                     [&](const Detection& d) { return d.score > p.confidence; });
    char line[64];
    std::snprintf(line, sizeof line, "%d detections above %.2f", static_cast<int>(shown), p.confidence);
    ui_text(line);
  }
  const float scale = std::min(max_w / img.width, max_h / img.height);
  const ImVec2 origin = ImGui::GetCursorScreenPos();
  p.image_x = origin.x, p.image_y = origin.y, p.image_scale = scale;
  ImGui::Image(p.image_texture.imgui_id(), ImVec2(img.width * scale, img.height * scale));
  const bool hovered = ImGui::IsItemHovered();
  if (hovered && ImGui::IsMouseClicked(ImGuiMouseButton_Left)) {
    const ImVec2 m = ImGui::GetMousePos();
    p.query = std::pair<int, int>(static_cast<int>((m.x - origin.x) / scale),
                                  static_cast<int>((m.y - origin.y) / scale));
    p.attention_dirty = true;
  }
  if (!p.run) return;
  const PipelineRun& r = *p.run;
  ImDrawList* draw = ImGui::GetWindowDrawList();
  const auto to_screen = [&](double x, double y) {
    return ImVec2(origin.x + x * scale, origin.y + y * scale);
  };
  const ImVec2 image_max = to_screen(img.width, img.height);
  refresh_attention(p);
  if (!r.attentions.empty() && !p.attention_texture.empty() && p.query) {
    // The token grid covers the letterboxed input; map its corners back to source pixels.
    const LetterboxGeometry& g = r.geometry;
    const ImVec2 a0 = to_screen(-g.left / g.ratio, -g.top / g.ratio);
    const ImVec2 a1 = to_screen((g.width - g.left) / g.ratio, (g.height - g.top) / g.ratio);
    draw->PushClipRect(origin, image_max, true);
    draw->AddImage(p.attention_texture.imgui_id(), a0, a1, ImVec2(0, 0), ImVec2(1, 1),
                   IM_COL32(255, 255, 255, 160));
    draw->PopClipRect();
  }
  for (const Detection& d : r.detections) {
    if (d.score <= p.confidence) continue;
    const Rgb c = class_colour(d.class_id);
    const ImU32 colour = IM_COL32(c[0], c[1], c[2], 255);
    draw->AddRect(to_screen(d.x1, d.y1), to_screen(d.x2, d.y2), colour, 0, 0, 3);
    char label[96];
    std::snprintf(label, sizeof label, "%s %.2f", d.name.c_str(), d.score);
    const ImVec2 size = ImGui::CalcTextSize(label);
    const ImVec2 at = to_screen(d.x1, d.y1);
    const ImVec2 top(at.x, std::max(origin.y, at.y - size.y - 2));
    draw->AddRectFilled(top, ImVec2(top.x + size.x + 4, top.y + size.y + 2), colour);
    draw->AddText(ImVec2(top.x + 2, top.y + 1), IM_COL32(255, 255, 255, 255), label);
    ui_record(label);
  }
  if (p.query) {
    const ImVec2 q = to_screen(p.query->first + 0.5, p.query->second + 0.5);
    draw->AddCircle(q, 7, IM_COL32(0, 255, 255, 255), 16, 2);
    draw->AddLine(ImVec2(q.x - 11, q.y), ImVec2(q.x + 11, q.y), IM_COL32(0, 255, 255, 255), 2);
    draw->AddLine(ImVec2(q.x, q.y - 11), ImVec2(q.x, q.y + 11), IM_COL32(0, 255, 255, 255), 2);
  }
}

void draw_attention_view(ViewerState& s) {
  PipelineState& p = s.pipeline;
  const PipelineRun& r = *p.run;
  if (r.attentions.empty()) {
    ImGui::TextDisabled("no attention maps in this network's tensors");
    return;
  }
  ImGui::SetNextItemWidth(260);
  if (ImGui::BeginCombo("attention block",
                        r.attentions[static_cast<size_t>(p.attention_index)].name.c_str())) {
    for (size_t i = 0; i < r.attentions.size(); ++i)
      if (ImGui::Selectable(r.attentions[i].name.c_str(), static_cast<int>(i) == p.attention_index)) {
        p.attention_index = static_cast<int>(i);
        p.attention_dirty = true;
      }
    ImGui::EndCombo();
  }
  const AttentionMapInfo& a = r.attentions[static_cast<size_t>(p.attention_index)];
  ImGui::SetNextItemWidth(260);
  if (ImGui::SliderInt("head", &p.head, 0, a.heads - 1)) p.attention_dirty = true;
  if (p.query) {
    ui_text("query pixel (" + std::to_string(p.query->first) + ", " + std::to_string(p.query->second) +
            "): attention over the " + std::to_string(a.grid_h) + "x" + std::to_string(a.grid_w) +
            " (h x w) key grid");
    draw_heatmap(p.attention_texture, p.attention_grid, 320, "attention probability", std::nullopt);
  }
}

void draw_feature_view(ViewerState& s) {
  PipelineState& p = s.pipeline;
  const PipelineRun& r = *p.run;
  ImGui::SetNextItemWidth(200);
  if (ImGui::BeginCombo("layer", p.feature_layer.c_str())) {
    for (const std::string& name : r.tensor_names)
      if (name.rfind("layer", 0) == 0 && ImGui::Selectable(name.c_str(), name == p.feature_layer)) {
        p.feature_layer = name;
        p.feature_dirty = true;
      }
    ImGui::EndCombo();
  }
  const NamedTensor& t = r.tensor(p.feature_layer);
  if (t.shape.size() != 4) {
    ImGui::TextDisabled("%s is not a [B, C, H, W] feature map", p.feature_layer.c_str());
    return;
  }
  const int channels = static_cast<int>(t.shape[1]), h = static_cast<int>(t.shape[2]),
            w = static_cast<int>(t.shape[3]);
  ImGui::SetNextItemWidth(400);
  if (ImGui::SliderInt("channel", &p.feature_channel, 0, channels - 1)) p.feature_dirty = true;
  p.feature_channel = std::clamp(p.feature_channel, 0, channels - 1);
  if (p.feature_dirty) {
    const size_t plane = static_cast<size_t>(h) * w;
    p.feature_grid.rows = h;
    p.feature_grid.cols = w;
    p.feature_grid.values.assign(t.values.begin() + static_cast<long>(plane * p.feature_channel),
                                 t.values.begin() + static_cast<long>(plane * (p.feature_channel + 1)));
    fit_range(p.feature_grid);
    p.feature_texture.upload(heat_pixels(p.feature_grid), w, h);
    p.feature_dirty = false;
  }
  ui_text(p.feature_layer + " channel " + std::to_string(p.feature_channel) + " of " +
          std::to_string(channels) + ", " + std::to_string(h) + "x" + std::to_string(w) + " (h x w)");
  draw_heatmap(p.feature_texture, p.feature_grid, std::min(ImGui::GetContentRegionAvail().x, 800.0f),
               "activation", std::nullopt);
}

}  // namespace

void draw_pipeline_panel(ViewerState& s) {
  PipelineState& p = s.pipeline;
  ImGui::BeginChild("pipeline controls", ImVec2(360, 0), true);
  draw_controls(s);
  ImGui::EndChild();
  ImGui::SameLine();
  ImGui::BeginChild("pipeline views", ImVec2(0, 0), true);
  if (p.job.valid()) ui_text("running YOLO26 on " + p.executor + " ...");
  if (ImGui::BeginTabBar("pipeline tabs")) {
    const auto tab = [&](const char* label, const char* key) {
      return begin_requested_tab(label, key, p.tab);
    };
    if (tab("Detections and attention", "detections")) {
      const bool have_run = p.run != nullptr;
      const ImVec2 avail = ImGui::GetContentRegionAvail();
      draw_image_view(s, have_run ? avail.x - 350 : avail.x, avail.y - 40);
      if (have_run) {
        ImGui::SameLine();
        ImGui::BeginGroup();
        draw_attention_view(s);
        ImGui::EndGroup();
      }
      ImGui::EndTabItem();
    }
    if (p.run && tab("Feature maps", "features")) {
      draw_feature_view(s);
      ImGui::EndTabItem();
    }
    ImGui::EndTabBar();
  }
  ImGui::EndChild();
}

}  // namespace lab::viewer
