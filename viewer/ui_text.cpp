// Recorded text helpers.
#include "viewer/ui_text.hpp"

#include <imgui.h>

namespace lab::viewer {

namespace {
std::vector<std::string> current_frame, last_frame;
}  // namespace

void ui_record(const std::string& text) {
  current_frame.push_back(text);
}

void ui_text(const std::string& text) {
  ImGui::TextUnformatted(text.c_str(), text.c_str() + text.size());
  ui_record(text);
}

void ui_text_coloured(const ImVec4& colour, const std::string& text) {
  ImGui::PushStyleColor(ImGuiCol_Text, colour);
  ui_text(text);
  ImGui::PopStyleColor();
}

void ui_text_wrapped(const std::string& text) {
  ImGui::PushTextWrapPos(0);
  ui_text(text);
  ImGui::PopTextWrapPos();
}

void ui_text_new_frame() {
  last_frame.swap(current_frame);
  current_frame.clear();
}

const std::vector<std::string>& ui_text_last_frame() {
  return last_frame;
}

bool ui_text_contains(const std::string& needle) {
  for (const std::string& t : last_frame)
    if (t.find(needle) != std::string::npos) return true;
  return false;
}

}  // namespace lab::viewer
