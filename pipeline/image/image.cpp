// Image decode and atomic encode: JPEG through libjpeg-turbo (jpeg_codec.hpp), PNG / BMP / other formats
// through stb_image and stb_image_write (implementations from the Debian libstb library, so only the
// declarations are included here).
#include "pipeline/image/image.hpp"

#include <algorithm>
#include <cctype>
#include <cstdint>
#include <string>

#include <stb_image.h>
#include <stb_image_write.h>

#include "nvrtc_runtime/errors.hpp"
#include "nvrtc_runtime/input_file.hpp"
#include "nvrtc_runtime/printable_text.hpp"
#include "pipeline/atomic_file.hpp"
#include "pipeline/image/jpeg_codec.hpp"

namespace lab {
namespace {

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

std::string image_size_problem(long long width, long long height) {
  if (width <= 0 || height <= 0)
    return std::to_string(width) + "x" + std::to_string(height) + " pixels: an empty image";
  if (width > kMaxImageSide || height > kMaxImageSide || width * height > kMaxImagePixels)
    return std::to_string(width) + "x" + std::to_string(height) + " pixels: larger than the limit of " +
           std::to_string(kMaxImageSide) + " per side and " + std::to_string(kMaxImagePixels) + " in all";
  return {};
}

Image decode_image_bytes(const std::vector<uint8_t>& bytes, const std::string& file_name) {
  const std::string name = printable(file_name);
  if (bytes.empty()) throw UsageError(name + ": cannot read image (empty file)");
  if (bytes.size() > size_t(INT32_MAX)) throw UsageError(name + ": cannot read image (larger than 2 GiB)");
  if (looks_like_jpeg(bytes)) return decode_jpeg(bytes, name);
  int w = 0, h = 0, channels = 0;
  // The size first, so a small file declaring a huge image is refused before anything is allocated.
  if (!stbi_info_from_memory(bytes.data(), int(bytes.size()), &w, &h, &channels))
    throw UsageError(name + ": cannot read image (" + stbi_failure_reason() + ")");
  if (const std::string problem = image_size_problem(w, h); !problem.empty())
    throw UsageError(name + ": cannot read image (" + problem + ")");
  stbi_uc* data = stbi_load_from_memory(bytes.data(), int(bytes.size()), &w, &h, &channels, 3);
  if (!data) throw UsageError(name + ": cannot read image (" + stbi_failure_reason() + ")");
  Image image;
  image.width = w;
  image.height = h;
  image.rgb.assign(data, data + size_t(w) * size_t(h) * 3);
  stbi_image_free(data);
  return image;
}

namespace {

// The size the header at the start of `bytes` declares, if it can be read from them.
std::optional<ImageSize> header_size(const std::string& text) {
  const std::vector<uint8_t> bytes(text.begin(), text.end());
  int w = 0, h = 0, channels = 0;
  const bool known = looks_like_jpeg(bytes) ? jpeg_size(bytes, &w, &h)
                                            : bytes.size() <= size_t(INT32_MAX) &&
                                                  stbi_info_from_memory(bytes.data(), int(bytes.size()), &w, &h,
                                                                        &channels);
  if (!known || !image_size_problem(w, h).empty()) return std::nullopt;
  return ImageSize{w, h};
}

}  // namespace

std::optional<ImageSize> image_file_size(const std::filesystem::path& path) {
  // The headers lie in the first bytes (a JPEG's up to its scan, after any metadata): read those, and the
  // whole file only when they do not hold them.
  constexpr size_t kHeaderBytes = 256 * 1024;
  try {
    const std::string prefix = read_input_prefix(path, kHeaderBytes, "image");
    if (std::optional<ImageSize> size = header_size(prefix); size || prefix.size() < kHeaderBytes) return size;
    return header_size(read_input_file(path, "image"));
  } catch (const UsageError&) {
    return std::nullopt;
  }
}

Image decode_image(const std::filesystem::path& path) {
  const std::string bytes = read_input_file(path, "image");
  return decode_image_bytes(std::vector<uint8_t>(bytes.begin(), bytes.end()), path.string());
}

bool writes_jpeg(const std::filesystem::path& path) {
  const std::string ext = lower_extension(path);
  return ext == ".jpg" || ext == ".jpeg";
}

std::vector<uint8_t> encode_image(const Image& image, const std::filesystem::path& path) {
  std::vector<uint8_t> encoded;
  if (writes_jpeg(path)) {
    encoded = encode_jpeg(image, kJpegQuality, path.string());
  } else if (lower_extension(path) == ".png") {
    if (!stbi_write_png_to_func(append_bytes, &encoded, image.width, image.height, 3, image.rgb.data(),
                                image.width * 3))
      throw RuntimeError(path.string() + ": PNG encoding failed");
  } else {
    throw UsageError(path.string() + ": unsupported image extension (use .jpg, .jpeg or .png)");
  }
  return encoded;
}

void write_image(const Image& image, const std::filesystem::path& path) {
  const std::vector<uint8_t> encoded = encode_image(image, path);
  write_file_atomically(path, std::string(encoded.begin(), encoded.end()));
}

}  // namespace lab
