// Text drawn through these helpers is also recorded per frame, so scripts can check what the UI showed
// (`expect_text`) without reading pixels.
#pragma once
#include <string>
#include <vector>

struct ImVec4;

namespace lab::viewer {

void ui_text(const std::string& text);
void ui_text_coloured(const ImVec4& colour, const std::string& text);
void ui_text_wrapped(const std::string& text);
// Records text drawn some other way (button labels, table cells drawn with ImGui directly).
void ui_record(const std::string& text);

// Called once per frame before any panel draws: the texts of the frame just finished become `last_frame`.
void ui_text_new_frame();
const std::vector<std::string>& ui_text_last_frame();
bool ui_text_contains(const std::string& needle);

}  // namespace lab::viewer
