// Hand-built image files for the hostile-input tests and the image fuzzer: a BMP header declaring any size,
// a small real JPEG / PNG / BMP, and a JPEG whose frame header is patched to declare another size.
#pragma once
#include <cstdint>
#include <string>

namespace lab::test {

// A 24-bit BMP of `width` x `height` with `pixel_bytes` bytes of pixel data after the 54-byte header (the
// header does not have to agree with the data).
std::string bmp_bytes(int32_t width, int32_t height, size_t pixel_bytes);
// A small valid 48x32 image: a gradient as JPEG (libjpeg-turbo) or PNG (stb_image_write), a grey BMP;
// `format` is "jpg", "png" or "bmp".
std::string small_image_bytes(const std::string& format);
// `jpeg` with the width and height of its first SOF0 frame header replaced.
std::string jpeg_declaring(std::string jpeg, uint16_t width, uint16_t height);

}  // namespace lab::test
