// Image argument expansion.
#include "pipeline/detect/image_inputs.hpp"

#include <algorithm>
#include <cctype>
#include <string>

#include "nvrtc_runtime/errors.hpp"
#include "pipeline/detect/model_locator.hpp"

namespace lab {

bool has_image_extension(const std::filesystem::path& path) {
  std::string ext = path.extension().string();
  std::transform(ext.begin(), ext.end(), ext.begin(), [](unsigned char c) { return char(std::tolower(c)); });
  return ext == ".jpg" || ext == ".jpeg" || ext == ".png" || ext == ".bmp";
}

std::vector<std::filesystem::path> collect_images(const std::vector<std::filesystem::path>& arguments) {
  std::vector<std::filesystem::path> images;
  std::string folders;
  for (const std::filesystem::path& argument : arguments) {
    std::error_code ec;
    if (std::filesystem::is_directory(argument, ec)) {
      std::vector<std::filesystem::path> inside;
      for (const auto& entry : std::filesystem::directory_iterator(argument, ec))
        if (entry.is_regular_file(ec) && has_image_extension(entry.path())) inside.push_back(entry.path());
      if (ec) throw UsageError(argument.string() + ": cannot list the folder (" + ec.message() + ")");
      std::sort(inside.begin(), inside.end());
      images.insert(images.end(), inside.begin(), inside.end());
      folders += (folders.empty() ? "" : ", ") + argument.string();
    } else if (std::filesystem::exists(argument, ec)) {
      images.push_back(argument);
    } else {  // missing, or a status the system cannot give (a symlink loop)
      throw UsageError(argument.string() + ": " + (ec ? ec.message() : "no such file or directory"));
    }
  }
  if (images.empty())
    throw UsageError(folders.empty() ? std::string("no images given")
                                     : "no images (jpg, jpeg, png, bmp) in " + folders);
  return images;
}

std::vector<std::filesystem::path> sample_images() {
  for (const std::filesystem::path& assets : shared_assets_candidates()) {
    std::vector<std::filesystem::path> found;
    for (const char* name : {"bus.jpg", "zidane.jpg"}) {
      std::error_code ec;
      if (std::filesystem::is_regular_file(assets / "images" / name, ec))
        found.push_back(assets / "images" / name);
    }
    if (!found.empty()) return found;
  }
  return {};
}

}  // namespace lab
