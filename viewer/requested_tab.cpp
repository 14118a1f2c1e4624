// begin_requested_tab: BeginTabItem with ImGuiTabItemFlags_SetSelected for the requested key.
#include "viewer/requested_tab.hpp"

#include <imgui.h>

namespace lab::viewer {

bool begin_requested_tab(const char* label, const char* key, std::string& requested) {
  const bool request = requested == key;
  const bool open = ImGui::BeginTabItem(label, nullptr, request ? ImGuiTabItemFlags_SetSelected : 0);
  if (request) requested.clear();
  return open;
}

}  // namespace lab::viewer
