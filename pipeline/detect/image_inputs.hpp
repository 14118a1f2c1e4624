// The image files named on a command line: files as given, folders expanded to the images inside them
// (jpg, jpeg, png, bmp, any letter case; not recursive), sorted by name.
#pragma once
#include <filesystem>
#include <vector>

namespace lab {

bool has_image_extension(const std::filesystem::path& path);

// UsageError "<path>: no such file or directory" for a missing argument ("<path>: Too many levels of symbolic
// links" and the like when its status cannot be read), and "no images in <folders>" when the result is empty.
std::vector<std::filesystem::path> collect_images(const std::vector<std::filesystem::path>& arguments);

// The sample images of the shared assets folder (bus.jpg, zidane.jpg) where it is found, else empty.
std::vector<std::filesystem::path> sample_images();

}  // namespace lab
