// The code editor: a scrolling child holding the gutter and an InputTextMultiline as tall as the text, so the
// gutter and the text scroll together and a line's position is known for highlighting and jumping.
#include "viewer/code_editor.hpp"

#include <algorithm>
#include <cstdio>

#include <imgui.h>
#include <imgui_stdlib.h>

#include "viewer/fonts.hpp"
#include "viewer/ui_text.hpp"

namespace lab::viewer {

int line_count(const std::string& text) {
  return 1 + static_cast<int>(std::count(text.begin(), text.end(), '\n'));
}

void insert_line(std::string& text, int line, const std::string& line_text) {
  size_t pos = 0;
  for (int l = 1; l < line && pos != std::string::npos; ++l) {
    pos = text.find('\n', pos);
    if (pos != std::string::npos) ++pos;
  }
  if (pos == std::string::npos || pos > text.size()) {
    if (!text.empty() && text.back() != '\n') text += '\n';
    text += line_text + "\n";
    return;
  }
  text.insert(pos, line_text + "\n");
}

bool draw_code_editor(const char* id, CodeEditor& editor, float width, float height) {
  if (const int missing = characters_without_glyph(editor.text); missing > 0)
    ui_text_coloured(ImVec4(1.0f, 0.8f, 0.3f, 1.0f),
                     std::to_string(missing) + " character(s) of this file have no glyph in the font (shown as ?)");
  const ImVec2 avail = ImGui::GetContentRegionAvail();
  const ImVec2 size(width > 0 ? width : avail.x, height > 0 ? height : avail.y);
  ImGui::BeginChild(id, size, true, ImGuiWindowFlags_HorizontalScrollbar);
  const ImGuiStyle& style = ImGui::GetStyle();
  const float line_h = ImGui::GetTextLineHeight();
  const int lines = line_count(editor.text);
  const float gutter_w = ImGui::CalcTextSize("00000").x + 10;

  if (editor.scroll_to_line > 0) {
    ImGui::SetScrollY(std::max(0.0f, (editor.scroll_to_line - 1) * line_h - ImGui::GetWindowHeight() / 3));
    editor.scroll_to_line = 0;
  }

  // Width of the longest line, so long lines scroll horizontally instead of being clipped.
  float text_w = 0;
  for (size_t start = 0; start <= editor.text.size();) {
    size_t end = editor.text.find('\n', start);
    if (end == std::string::npos) end = editor.text.size();
    text_w = std::max(text_w, ImGui::CalcTextSize(editor.text.data() + start, editor.text.data() + end).x);
    start = end + 1;
  }
  const ImVec2 origin = ImGui::GetCursorScreenPos();
  const float text_x = origin.x + gutter_w;
  const float text_y = origin.y + style.FramePadding.y;
  const float input_w = std::max(ImGui::GetContentRegionAvail().x - gutter_w, text_w + 4 * line_h);
  ImDrawList* draw = ImGui::GetWindowDrawList();

  // Highlighted line behind the (transparent) text input.
  if (editor.highlight_line > 0 && editor.highlight_line <= lines) {
    const float y = text_y + (editor.highlight_line - 1) * line_h;
    draw->AddRectFilled(ImVec2(origin.x, y), ImVec2(text_x + input_w, y + line_h),
                        IM_COL32(140, 30, 30, 200));
  }
  // Gutter: only the visible line numbers.
  const float scroll = ImGui::GetScrollY();
  const int first = std::max(1, static_cast<int>(scroll / line_h));
  const int last = std::min(lines, first + static_cast<int>(ImGui::GetWindowHeight() / line_h) + 2);
  for (int l = first; l <= last; ++l) {
    char number[16];
    std::snprintf(number, sizeof number, "%4d", l);
    const bool error = editor.error_lines.count(l) > 0;
    draw->AddText(ImVec2(origin.x + 2, text_y + (l - 1) * line_h),
                  error ? IM_COL32(255, 90, 90, 255) : IM_COL32(130, 130, 140, 255), number);
  }

  ImGui::SetCursorScreenPos(ImVec2(text_x, origin.y));
  ImGui::PushStyleColor(ImGuiCol_FrameBg, IM_COL32(0, 0, 0, 0));
  ImGui::PushStyleColor(ImGuiCol_FrameBgHovered, IM_COL32(0, 0, 0, 0));
  ImGui::PushStyleColor(ImGuiCol_FrameBgActive, IM_COL32(0, 0, 0, 0));
  ImGuiInputTextFlags flags = ImGuiInputTextFlags_AllowTabInput | ImGuiInputTextFlags_NoHorizontalScroll;
  if (editor.read_only) flags |= ImGuiInputTextFlags_ReadOnly;
  const auto track_cursor = [](ImGuiInputTextCallbackData* data) {
    static_cast<CodeEditor*>(data->UserData)->cursor_line =
        1 + static_cast<int>(std::count(data->Buf, data->Buf + data->CursorPos, '\n'));
    return 0;
  };
  const bool changed = ImGui::InputTextMultiline(
      "##text", &editor.text, ImVec2(input_w, (lines + 1) * line_h + 2 * style.FramePadding.y),
      flags | ImGuiInputTextFlags_CallbackAlways, track_cursor, &editor);
  ImGui::PopStyleColor(3);
  ImGui::EndChild();
  return changed;
}

}  // namespace lab::viewer
