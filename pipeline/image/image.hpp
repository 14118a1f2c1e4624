// RGB8 images in memory: decode JPEG (libjpeg-turbo) or PNG / BMP (stb_image), and write JPEG (quality 95,
// libjpeg-turbo) or PNG (stb_image_write) chosen by the output extension, atomically (a temporary file beside
// the target, then rename).
#pragma once
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

namespace lab {

struct Image {
  int width = 0, height = 0;
  std::vector<uint8_t> rgb;  // row-major, 3 bytes per pixel (R, G, B)

  Image() = default;
  Image(int w, int h, uint8_t fill = 0) : width(w), height(h), rgb(size_t(w) * size_t(h) * 3, fill) {}
  uint8_t* pixel(int x, int y) { return rgb.data() + (size_t(y) * size_t(width) + size_t(x)) * 3; }
  const uint8_t* pixel(int x, int y) const {
    return rgb.data() + (size_t(y) * size_t(width) + size_t(x)) * 3;
  }
};

// The largest image any decoder accepts (checked from the header, before the pixels are allocated): at most
// 32768 pixels per side and 2^27 (134 million, 384 MiB of RGB) in all.
constexpr long long kMaxImageSide = 32768;
constexpr long long kMaxImagePixels = 1LL << 27;
// Empty when a width x height image may be decoded, else the reason it may not (empty or over the limit).
std::string image_size_problem(long long width, long long height);

// Decodes an image file (any channel count becomes RGB). UsageError "<file>: cannot read image (<reason>)"
// for a missing, unreadable, not regular (FIFO, device), truncated, corrupt, empty (0 pixels) or too large
// file; the file name is escaped (printable_text.hpp).
Image decode_image(const std::filesystem::path& path);
// Same for bytes in memory; `name` is used in the error message.
Image decode_image_bytes(const std::vector<uint8_t>& bytes, const std::string& name);

struct ImageSize {
  int width = 0, height = 0;
};
// The size a file's header declares, read without decoding the pixels; nullopt when the file or its header
// cannot be read or the size is refused (decoding it then says why).
std::optional<ImageSize> image_file_size(const std::filesystem::path& path);

// The quality encode_image writes JPEG at (the GPU encoder, nvjpeg_encoder.hpp, matches it).
constexpr int kJpegQuality = 95;
// Whether encode_image writes `path` as JPEG (`.jpg` / `.jpeg`, any case).
bool writes_jpeg(const std::filesystem::path& path);
// Encodes for the extension of `path`: `.jpg`/`.jpeg` (quality kJpegQuality) or `.png`; any other extension
// is a UsageError.
std::vector<uint8_t> encode_image(const Image& image, const std::filesystem::path& path);
// Writes encode_image(image, path) to `path`; the file appears complete or not at all.
void write_image(const Image& image, const std::filesystem::path& path);

}  // namespace lab
