// A source editor widget: ImGui's multiline text input beside a line-number gutter, with error marks in the
// gutter, one highlighted line, and scrolling to a line on request. UTF-8 text is drawn with the merged font
// (fonts.hpp); characters it still lacks are counted in a note above the text.
#pragma once
#include <set>
#include <string>

namespace lab::viewer {

struct CodeEditor {
  std::string text;
  int highlight_line = 0;     // 1-based; 0: none
  int scroll_to_line = 0;     // 1-based request, consumed by the next draw
  std::set<int> error_lines;  // marked red in the gutter
  bool read_only = false;
  int cursor_line = 0;        // 1-based line of the text cursor, updated while the editor is active; 0: none
};

// Draws the editor filling `width` x `height` (0: the available space). Returns true when the user changed
// the text this frame.
bool draw_code_editor(const char* id, CodeEditor& editor, float width = 0, float height = 0);

// Inserts `line_text` as a new line before 1-based `line` (after the last line when `line` is past the end).
void insert_line(std::string& text, int line, const std::string& line_text);
int line_count(const std::string& text);

}  // namespace lab::viewer
