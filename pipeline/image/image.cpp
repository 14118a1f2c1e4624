// Image decode and atomic encode: JPEG through libjpeg-turbo (jpeg_codec.hpp), PNG / BMP / other formats
// through stb_image and stb_image_write (implementations from the Debian libstb library, so only the
// declarations are included here).
#include "pipeline/image/image.hpp"

#include <algorithm>
#include <cctype>
#include <fstream>
#include <string>

#include <stb_image.h>
#include <stb_image_write.h>

#include "nvrtc_runtime/errors.hpp"
#include "pipeline/atomic_file.hpp"
#include "pipeline/image/jpeg_codec.hpp"

namespace lab {
namespace {

std::vector<uint8_t> read_bytes(const std::filesystem::path& path) {
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec))
    throw UsageError(path.string() + ": cannot read image (" +
                     (std::filesystem::exists(path, ec) ? "not a regular file" : "no such file") + ")");
  std::ifstream in(path, std::ios::binary);
  if (!in) throw UsageError(path.string() + ": cannot read image (cannot open the file)");
  std::vector<uint8_t> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (in.bad()) throw UsageError(path.string() + ": cannot read image (read error)");
  return bytes;
}

std::string lower_extension(const std::filesystem::path& path) {
  std::string ext = path.extension().string();
  std::transform(ext.begin(), ext.end(), ext.begin(), [](unsigned char c) { return char(std::tolower(c)); });
  return ext;
}

void append_bytes(void* context, void* data, int size) {
  auto* out = static_cast<std::vector<uint8_t>*>(context);
  const auto* bytes = static_cast<const uint8_t*>(data);
  out->insert(out->end(), bytes, bytes + size);
}

}  // namespace

Image decode_image_bytes(const std::vector<uint8_t>& bytes, const std::string& name) {
  if (bytes.empty()) throw UsageError(name + ": cannot read image (empty file)");
  if (looks_like_jpeg(bytes)) return decode_jpeg(bytes, name);
  int w = 0, h = 0, channels = 0;
  stbi_uc* data = stbi_load_from_memory(bytes.data(), int(bytes.size()), &w, &h, &channels, 3);
  if (!data) throw UsageError(name + ": cannot read image (" + stbi_failure_reason() + ")");
  Image image;
  image.width = w;
  image.height = h;
  image.rgb.assign(data, data + size_t(w) * size_t(h) * 3);
  stbi_image_free(data);
  return image;
}

Image decode_image(const std::filesystem::path& path) {
  return decode_image_bytes(read_bytes(path), path.string());
}

void write_image(const Image& image, const std::filesystem::path& path) {
  const std::string ext = lower_extension(path);
  std::vector<uint8_t> encoded;
  if (ext == ".jpg" || ext == ".jpeg") {
    encoded = encode_jpeg(image, 95, path.string());
  } else if (ext == ".png") {
    if (!stbi_write_png_to_func(append_bytes, &encoded, image.width, image.height, 3, image.rgb.data(),
                                image.width * 3))
      throw RuntimeError(path.string() + ": PNG encoding failed");
  } else {
    throw UsageError(path.string() + ": unsupported image extension (use .jpg, .jpeg or .png)");
  }
  write_file_atomically(path, std::string(encoded.begin(), encoded.end()));
}

}  // namespace lab
