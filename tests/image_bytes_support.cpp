// Hand-built image files (see image_bytes_support.hpp).
#include "tests/image_bytes_support.hpp"

#include <stdexcept>
#include <vector>

#include "tests/checkpoint_test_support.hpp"
#include "pipeline/image/image.hpp"
#include "pipeline/image/jpeg_codec.hpp"
#include "tests/test_helpers.hpp"

namespace lab::test {
namespace {

void put_le(std::string& out, uint32_t value, int bytes) {
  for (int i = 0; i < bytes; ++i) out += static_cast<char>((value >> (8 * i)) & 0xFF);
}

Image gradient() {
  Image image(48, 32);
  for (int y = 0; y < image.height; ++y)
    for (int x = 0; x < image.width; ++x) {
      uint8_t* p = image.pixel(x, y);
      p[0] = uint8_t(x * 5), p[1] = uint8_t(y * 7), p[2] = uint8_t((x + y) * 3);
    }
  return image;
}

}  // namespace

std::string bmp_bytes(int32_t width, int32_t height, size_t pixel_bytes) {
  std::string out = "BM";
  put_le(out, uint32_t(54 + pixel_bytes), 4);  // file size
  put_le(out, 0, 4);                           // reserved
  put_le(out, 54, 4);                          // pixel data offset
  put_le(out, 40, 4);                          // BITMAPINFOHEADER
  put_le(out, uint32_t(width), 4);
  put_le(out, uint32_t(height), 4);
  put_le(out, 1, 2);                              // planes
  put_le(out, 24, 2);                             // bits per pixel
  for (int i = 0; i < 6; ++i) put_le(out, 0, 4);  // compression, size, resolution, palette
  out.append(pixel_bytes, '\x40');
  return out;
}

std::string small_image_bytes(const std::string& format) {
  const Image image = gradient();
  if (format == "jpg") {
    const std::vector<uint8_t> jpeg = encode_jpeg(image, 90, "gradient.jpg");
    return std::string(jpeg.begin(), jpeg.end());
  }
  if (format == "png") {
    ScratchDir dir("gradient-png");
    write_image(image, dir.path / "gradient.png");
    return read_binary(dir.path / "gradient.png");
  }
  // BMP rows of 48 * 3 bytes need no padding; bottom-up BGR, here all one grey.
  return bmp_bytes(image.width, image.height, size_t(image.width) * image.height * 3);
}

std::string jpeg_declaring(std::string jpeg, uint16_t width, uint16_t height) {
  const size_t sof = jpeg.find("\xFF\xC0");
  if (sof == std::string::npos) throw std::runtime_error("no SOF0 marker in the test JPEG");
  // FF C0, length (2), precision (1), height (2), width (2), big-endian.
  jpeg[sof + 5] = char(height >> 8), jpeg[sof + 6] = char(height & 0xFF);
  jpeg[sof + 7] = char(width >> 8), jpeg[sof + 8] = char(width & 0xFF);
  return jpeg;
}

}  // namespace lab::test
