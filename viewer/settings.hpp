// What the viewer remembers between sessions (beside ImGui's own window layout ini): the last kernel,
// variant, image, backend and confidence threshold, in a small JSON file of the config folder.
#pragma once
#include <filesystem>
#include <string>

namespace lab::viewer {

struct Settings {
  std::string last_kernel, last_variant, last_image, backend;
  float confidence = 0.25f;
  bool auto_compile = true;
};

// --config-dir, else $XDG_CONFIG_HOME/yolo26-lab, else ~/.config/yolo26-lab.
std::filesystem::path config_dir(const std::string& given);
// Missing or unreadable files give the defaults (a broken settings file never stops the viewer).
Settings load_settings(const std::filesystem::path& file);
void save_settings(const std::filesystem::path& file, const Settings& settings);

}  // namespace lab::viewer
