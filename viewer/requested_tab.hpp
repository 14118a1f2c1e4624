// A tab item that a script (or another panel) can select: `requested` names the tab to select next frame.
#pragma once
#include <string>

namespace lab::viewer {

// ImGui::BeginTabItem(label), selected when `requested` equals `key` (then cleared). True when the tab is
// open: the caller draws it and calls ImGui::EndTabItem().
bool begin_requested_tab(const char* label, const char* key, std::string& requested);

}  // namespace lab::viewer
