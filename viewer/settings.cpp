// Settings JSON read and write.
#include "viewer/settings.hpp"

#include <cstdlib>
#include <fstream>

#include <nlohmann/json.hpp>

namespace lab::viewer {

namespace fs = std::filesystem;

fs::path config_dir(const std::string& given) {
  if (!given.empty()) return given;
  if (const char* xdg = std::getenv("XDG_CONFIG_HOME"); xdg && *xdg) return fs::path(xdg) / "yolo26-lab";
  if (const char* home = std::getenv("HOME"); home && *home) return fs::path(home) / ".config/yolo26-lab";
  return fs::temp_directory_path() / "yolo26-lab";
}

Settings load_settings(const fs::path& file) {
  Settings s;
  std::ifstream in(file);
  if (!in) return s;
  const nlohmann::json j = nlohmann::json::parse(in, nullptr, false);
  if (!j.is_object()) return s;
  s.last_kernel = j.value("last_kernel", s.last_kernel);
  s.last_variant = j.value("last_variant", s.last_variant);
  s.last_image = j.value("last_image", s.last_image);
  s.backend = j.value("backend", s.backend);
  s.confidence = j.value("confidence", s.confidence);
  s.auto_compile = j.value("auto_compile", s.auto_compile);
  return s;
}

void save_settings(const fs::path& file, const Settings& s) {
  std::error_code ec;
  fs::create_directories(file.parent_path(), ec);
  const nlohmann::json j = {{"last_kernel", s.last_kernel}, {"last_variant", s.last_variant},
                            {"last_image", s.last_image},   {"backend", s.backend},
                            {"confidence", s.confidence},   {"auto_compile", s.auto_compile}};
  std::ofstream out(file);
  out << j.dump(2) << "\n";
}

}  // namespace lab::viewer
