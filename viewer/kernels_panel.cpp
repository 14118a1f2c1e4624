// The Kernels panel: kernel/variant/scenario browser on the left; on the right the editor of the kernel's
// source with save (Ctrl+S), compile and auto-compile, the list of compile errors (click: jump to the line),
// and tabs with the exact compiler input, PTX and SASS beside the source (assembly_view.hpp), the resource
// report and the compiler log.
#include <cstdio>
#include <functional>

#include <imgui.h>

#include "harness/resources.hpp"
#include "viewer/panels.hpp"
#include "viewer/requested_tab.hpp"
#include "viewer/ui_text.hpp"
#include "viewer/viewer_actions.hpp"

namespace lab::viewer {

namespace {

const ImVec4 kRed(1.0f, 0.4f, 0.4f, 1.0f);
const ImVec4 kGreen(0.4f, 0.9f, 0.4f, 1.0f);
const ImVec4 kGrey(0.6f, 0.6f, 0.65f, 1.0f);

void guarded(ViewerState& s, const std::function<void()>& action) {
  try {
    action();
    s.message.clear();
  } catch (const std::exception& e) {
    s.message = e.what();
  }
}

void draw_scenarios_of(ViewerState& s, const Runner& runner) {
  for (const Scenario& scenario : s.scenarios) {
    if (scenario.kernel != runner.name()) continue;
    const std::string file = std::filesystem::path(scenario.path).filename().string();
    if (!ImGui::TreeNode(file.c_str())) continue;
    for (const ScenarioCase& c : scenario.cases) {
      ImGui::PushID(&c);
      if (ImGui::Selectable(c.name.c_str(), s.run.scenario_case == file + " / " + c.name))
        guarded(s, [&] { apply_scenario_case(s, scenario, c); });
      if (ImGui::IsItemHovered())
        ImGui::SetTooltip("%s:%d: set the Run panel's parameters", file.c_str(), c.line);
      ImGui::PopID();
    }
    ImGui::TreePop();
  }
}

void draw_browser(ViewerState& s) {
  ImGui::TextDisabled("kernel tree (%s)", s.workspace.origin.c_str());
  ImGui::TextWrapped("%s", s.workspace.dir.c_str());
  ImGui::Separator();
  std::string family;
  bool family_open = false;
  for (const Runner* r : Registry::instance().all()) {
    if (r->family() != family) {
      if (family_open) ImGui::TreePop();
      family = r->family();
      ImGui::SetNextItemOpen(true, ImGuiCond_Once);
      family_open = ImGui::TreeNode(family.c_str());
    }
    if (!family_open) continue;
    const bool selected = s.kernels.runner == r;
    ImGui::PushID(r);
    if (ImGui::Selectable(r->name().c_str(), selected)) guarded(s, [&] { open_kernel(s, r->name()); });
    if (ImGui::IsItemHovered())
      ImGui::SetTooltip("%s\n%s", r->description().c_str(), r->source_path().c_str());
    if (selected) {
      ImGui::Indent();
      for (const KernelVariant& v : r->variants()) {
        if (ImGui::RadioButton(v.name.c_str(), s.kernels.variant == v.name))
          guarded(s, [&] { select_variant(s, v.name); });
        if (ImGui::IsItemHovered()) ImGui::SetTooltip("%s", v.description.c_str());
      }
      draw_scenarios_of(s, *r);
      ImGui::Unindent();
    }
    ImGui::PopID();
  }
  if (family_open) ImGui::TreePop();
  ImGui::Separator();
  if (ImGui::TreeNode("files of the tree")) {
    for (const std::string& f : s.workspace.context.tree->list())
      if (ImGui::Selectable(f.c_str(), f == s.kernels.file)) guarded(s, [&] { open_file(s, f); });
    ImGui::TreePop();
  }
  for (const std::string& e : s.scenario_errors) ui_text_coloured(kRed, e);
}

void draw_toolbar(ViewerState& s) {
  const bool dirty = s.kernels.editor.text != s.kernels.saved_text;
  ui_text(s.kernels.file + (dirty ? " *" : ""));
  ImGui::SameLine();
  if (ImGui::Button("Save (Ctrl+S)")) guarded(s, [&] { save_file(s); });
  ImGui::SameLine();
  if (ImGui::Button("Compile")) guarded(s, [&] { start_compile(s, dirty); });
  ImGui::SameLine();
  if (ImGui::Checkbox("auto-compile", &s.kernels.auto_compile))
    s.settings.auto_compile = s.kernels.auto_compile;
  if (ImGui::IsItemHovered()) ImGui::SetTooltip("Compile the unsaved text after a pause in typing");
  ImGui::SameLine();
  const bool failed = s.kernels.compiled && !s.kernels.compiled->ok && !s.kernels.compile_job.valid();
  ui_text_coloured(failed ? kRed : kGrey, s.kernels.status);
}

void draw_error_list(ViewerState& s) {
  const std::vector<Diagnostic>& diags = current_diagnostics(s);
  const bool compile_failed = s.kernels.compiled && !s.kernels.compiled->ok;
  if (diags.empty()) {
    if (compile_failed) ui_text_coloured(kRed, s.kernels.compiled->message);
    return;
  }
  ImGui::BeginChild("errors", ImVec2(0, 110), true);
  for (size_t i = 0; i < diags.size(); ++i) {
    const Diagnostic& d = diags[i];
    const std::string line = d.file + ":" + std::to_string(d.line) + ":" + std::to_string(d.column) + ": " +
                             d.severity + ": " + d.message;
    ImGui::PushID(static_cast<int>(i));
    ImGui::PushStyleColor(ImGuiCol_Text, d.severity == "error" ? kRed : kGrey);
    if (ImGui::Selectable(line.c_str(),
                          d.file == s.kernels.file && d.line == s.kernels.editor.highlight_line))
      jump_to_diagnostic(s, d);
    ImGui::PopStyleColor();
    ui_record(line);
    ImGui::PopID();
  }
  ImGui::EndChild();
}

void read_only_text(const char* id, const std::string& text) {
  ImGui::InputTextMultiline(id, const_cast<char*>(text.c_str()), text.size() + 1, ImVec2(-1, -1),
                            ImGuiInputTextFlags_ReadOnly);
}

std::string optional_text(const std::optional<int>& v) {
  return v ? std::to_string(*v) : "-";
}

void draw_resources(const CompileOutcome& c) {
  const CompileResult& r = c.result;
  char line[320];
  std::snprintf(line, sizeof line, "target %s, compile %.1f ms (%s), key %.16s; occupancy at %d threads per block: %s",
                r.target.c_str(), r.compile_ms, r.cache_hit ? "cache hit" : "cache miss", r.cache_key.c_str(),
                c.occupancy_block_threads,
                c.occupancy.empty() ? "static, from the target's limits" : "the runtime's");
  ui_text(line);
  const int columns = 11;
  if (ImGui::BeginTable("resources", columns,
                        ImGuiTableFlags_Borders | ImGuiTableFlags_RowBg | ImGuiTableFlags_SizingFixedFit)) {
    for (const char* h : {"kernel", "registers", "static smem B", "stack B", "spill stores", "spill loads",
                          "constant B", "max threads", "blocks/SM", "warps/SM", "limited by"})
      ImGui::TableSetupColumn(h);
    ImGui::TableHeadersRow();
    for (size_t i = 0; i < r.resources.size(); ++i) {
      const ResourceUsage& u = r.resources[i];
      const std::array<std::string, 3> occupancy = occupancy_cells(c.occupancy, c.static_occupancy, i);
      const std::string cells[columns] = {u.kernel,
                                          optional_text(u.registers),
                                          optional_text(u.static_shared_bytes),
                                          optional_text(u.local_bytes),
                                          optional_text(u.spill_stores),
                                          optional_text(u.spill_loads),
                                          optional_text(u.constant_bytes),
                                          optional_text(u.max_threads_per_block),
                                          occupancy[0],
                                          occupancy[1],
                                          occupancy[2]};
      ImGui::TableNextRow();
      for (int col = 0; col < columns; ++col) {
        ImGui::TableSetColumnIndex(col);
        ui_text(cells[col]);
      }
    }
    ImGui::EndTable();
  }
}

// Source | PTX or SASS; a selection in the editor's file also highlights (and scrolls to) the editor line.
void draw_assembly_tab(ViewerState& s, const char* kind, const AssemblyListing& listing) {
  const auto read_source = [&s](const std::string& file) {
    if (file == s.kernels.file) return s.kernels.editor.text;
    return s.workspace.context.tree->exists(file) ? s.workspace.context.tree->read(file) : std::string();
  };
  if (draw_assembly_view(kind, listing, s.kernels.file, read_source, s.kernels.assembly))
    follow_in_editor(s);
}

void draw_output_tabs(ViewerState& s) {
  if (!s.kernels.compiled) {
    ImGui::TextDisabled("not compiled yet");
    return;
  }
  const CompileOutcome& c = *s.kernels.compiled;
  if (!ImGui::BeginTabBar("compiler outputs")) return;
  const auto tab = [&](const char* label, const char* key) {
    return begin_requested_tab(label, key, s.kernels.output_tab);
  };
  if (tab("Compiler input", "source")) {
    read_only_text("##source", c.compiler_input);
    ImGui::EndTabItem();
  }
  if (tab("PTX", "ptx")) {
    if (c.ok)
      draw_assembly_tab(s, "PTX", c.ptx_listing);
    else
      read_only_text("##ptx", "// no PTX: the compile failed");
    ImGui::EndTabItem();
  }
  if (tab("SASS", "sass")) {
    if (c.ok && !c.sass_listing.lines.empty())
      draw_assembly_tab(s, "SASS", c.sass_listing);
    else
      read_only_text("##sass", c.ok ? c.sass : "// no SASS: the compile failed");
    ImGui::EndTabItem();
  }
  if (tab("Resources", "resources")) {
    if (c.ok)
      draw_resources(c);
    else
      ui_text_coloured(kRed, "no resource report: the compile failed");
    ImGui::EndTabItem();
  }
  if (tab("Log", "log")) {
    read_only_text("##log", c.ok ? c.result.log : c.message + "\n\n" + c.result.log);
    ImGui::EndTabItem();
  }
  ImGui::EndTabBar();
}

}  // namespace

void draw_kernels_panel(ViewerState& s) {
  ImGui::BeginChild("browser", ImVec2(290, 0), true);
  draw_browser(s);
  ImGui::EndChild();
  ImGui::SameLine();
  ImGui::BeginChild("work", ImVec2(0, 0), false);
  if (!s.kernels.runner) {
    ui_text("Pick a kernel on the left.");
    ImGui::EndChild();
    return;
  }
  draw_toolbar(s);
  const ImGuiIO& io = ImGui::GetIO();
  if (io.KeyCtrl && ImGui::IsKeyPressed('S', false)) guarded(s, [&] { save_file(s); });
  const float editor_h = ImGui::GetContentRegionAvail().y * 0.58f;
  const int cursor_line = s.kernels.editor.cursor_line;
  if (draw_code_editor("editor", s.kernels.editor, 0, editor_h)) note_edit(s, ImGui::GetTime());
  // The cursor moved to another line: the PTX / SASS tabs highlight that line's assembly.
  if (s.kernels.editor.cursor_line != cursor_line)
    select_source_line(s.kernels.assembly, {s.kernels.file, s.kernels.editor.cursor_line});
  draw_error_list(s);
  draw_output_tabs(s);
  ImGui::EndChild();
}

}  // namespace lab::viewer
