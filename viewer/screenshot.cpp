// glReadPixels of the back buffer, rows flipped to top-first, written with stb_image_write.
#include "viewer/screenshot.hpp"

#include <GL/gl.h>
#include <stb_image_write.h>

#include <cstdint>
#include <cstring>
#include <vector>

#include "nvrtc_runtime/errors.hpp"

namespace lab::viewer {

void save_framebuffer_png(const std::filesystem::path& file, int width, int height) {
  std::vector<uint8_t> pixels(static_cast<size_t>(width) * height * 4);
  glReadBuffer(GL_BACK);
  glPixelStorei(GL_PACK_ALIGNMENT, 1);
  glReadPixels(0, 0, width, height, GL_RGBA, GL_UNSIGNED_BYTE, pixels.data());
  const size_t row = static_cast<size_t>(width) * 4;
  std::vector<uint8_t> flipped(pixels.size());
  for (int y = 0; y < height; ++y)
    std::memcpy(flipped.data() + static_cast<size_t>(y) * row,
                pixels.data() + static_cast<size_t>(height - 1 - y) * row, row);
  for (size_t i = 3; i < flipped.size(); i += 4) flipped[i] = 255;  // opaque, whatever the GL alpha holds
  if (!stbi_write_png(file.c_str(), width, height, 4, flipped.data(), static_cast<int>(row)))
    throw RuntimeError("cannot write the screenshot '" + file.string() + "'");
}

std::array<uint8_t, 3> read_framebuffer_pixel(int x, int y, int height) {
  uint8_t rgba[4] = {};
  glReadBuffer(GL_BACK);
  glPixelStorei(GL_PACK_ALIGNMENT, 1);
  glReadPixels(x, height - 1 - y, 1, 1, GL_RGBA, GL_UNSIGNED_BYTE, rgba);
  return {rgba[0], rgba[1], rgba[2]};
}

}  // namespace lab::viewer
