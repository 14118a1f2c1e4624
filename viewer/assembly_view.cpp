// Source | assembly panes with the line-information highlighting.
#include "viewer/assembly_view.hpp"

#include <algorithm>
#include <cstdio>
#include <optional>
#include <sstream>

#include <imgui.h>

#include "viewer/ui_text.hpp"

namespace lab::viewer {

namespace {

const ImU32 kHighlight = IM_COL32(150, 110, 20, 130);

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

std::string trimmed(const std::string& s) {
  const size_t first = s.find_first_not_of(" \t");
  return first == std::string::npos ? "" : s.substr(first, s.find_last_not_of(" \t") - first + 1);
}

// One row: a full-width selectable behind its numbered text (the text may contain "##", which a label may
// not). Returns true when clicked.
bool draw_row(size_t index, const std::string& text, bool highlighted) {
  ImGui::PushID(static_cast<int>(index));
  const ImVec2 at = ImGui::GetCursorPos();
  if (highlighted) {
    const ImVec2 screen = ImGui::GetCursorScreenPos();
    ImGui::GetWindowDrawList()->AddRectFilled(
        screen, ImVec2(screen.x + ImGui::GetWindowWidth() + ImGui::GetScrollMaxX(),
                       screen.y + ImGui::GetTextLineHeightWithSpacing()),
        kHighlight);
  }
  const bool clicked = ImGui::Selectable("##row", false);
  ImGui::SetCursorPos(at);
  char number[16];
  std::snprintf(number, sizeof number, "%5zu  ", index + 1);
  const std::string row = number + text;
  ImGui::TextUnformatted(row.c_str(), row.c_str() + row.size());
  ImGui::PopID();
  return clicked;
}

// Lines [0, count) with a clipper; scrolls so that `scroll_to` (when set) is a third down the pane.
template <class Row>
void draw_rows(size_t count, std::optional<size_t> scroll_to, const Row& row) {
  const float line_h = ImGui::GetTextLineHeightWithSpacing();
  if (scroll_to)
    ImGui::SetScrollY(std::max(0.0f, float(*scroll_to) * line_h - ImGui::GetWindowHeight() / 3));
  ImGuiListClipper clipper;
  clipper.Begin(static_cast<int>(count), line_h);
  while (clipper.Step())
    for (int i = clipper.DisplayStart; i < clipper.DisplayEnd; ++i) row(static_cast<size_t>(i));
  clipper.End();
}

}  // namespace

void select_source_line(AssemblySelection& selection, const SourceLine& source) {
  selection.source = source;
  selection.scroll_source = selection.scroll_assembly = true;
}

bool select_assembly_line(AssemblySelection& selection, const AssemblyListing& listing, size_t index) {
  if (index >= listing.lines.size() || listing.where[index].line == 0) return false;
  selection.source = listing.where[index];
  selection.scroll_source = true;
  return true;
}

bool draw_assembly_view(const char* kind, const AssemblyListing& listing, const std::string& default_file,
                        const std::function<std::string(const std::string&)>& read_source,
                        AssemblySelection& selection) {
  const std::string file = selection.source.file.empty() ? default_file : selection.source.file;
  const std::vector<std::string> source = lines_of(read_source(file));
  const std::vector<size_t> highlighted = lines_from(listing, selection.source);
  bool changed = false;

  // The recorded summary (what scripts check): the selection, then each highlighted line with its number.
  if (selection.source.line > 0) {
    ui_text(selection.source.file + ":" + std::to_string(selection.source.line) + ": " +
            std::to_string(highlighted.size()) + " " + kind + " lines");
    for (size_t i : highlighted)
      ui_record("highlighted " + std::string(kind) + " " + std::to_string(i + 1) + ": " + trimmed(listing.lines[i]));
  } else {
    ui_text(std::string("click a source line to highlight its ") + kind + ", or a " + kind +
            " line to find its source line");
  }

  const float half = ImGui::GetContentRegionAvail().x * 0.45f;
  ImGui::BeginChild("source pane", ImVec2(half, 0), true, ImGuiWindowFlags_HorizontalScrollbar);
  ImGui::TextDisabled("%s", file.c_str());
  const std::optional<size_t> source_scroll =
      selection.scroll_source && selection.source.line > 0 ? std::optional<size_t>(selection.source.line - 1)
                                                            : std::nullopt;
  selection.scroll_source = false;
  draw_rows(source.size(), source_scroll, [&](size_t i) {
    const bool selected = selection.source.file == file && selection.source.line == int(i) + 1;
    if (draw_row(i, source[i], selected)) {
      select_source_line(selection, {file, int(i) + 1});
      selection.scroll_source = false;
      changed = true;
    }
  });
  ImGui::EndChild();
  ImGui::SameLine();
  ImGui::BeginChild("assembly pane", ImVec2(0, 0), true, ImGuiWindowFlags_HorizontalScrollbar);
  const std::optional<size_t> assembly_scroll =
      selection.scroll_assembly && !highlighted.empty() ? std::optional<size_t>(highlighted.front()) : std::nullopt;
  selection.scroll_assembly = false;
  draw_rows(listing.lines.size(), assembly_scroll, [&](size_t i) {
    const bool lit = std::binary_search(highlighted.begin(), highlighted.end(), i);
    if (draw_row(i, listing.lines[i], lit) && select_assembly_line(selection, listing, i)) changed = true;
  });
  ImGui::EndChild();
  return changed;
}

}  // namespace lab::viewer
