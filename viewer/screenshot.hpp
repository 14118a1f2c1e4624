// Saving the current OpenGL framebuffer (the back buffer just rendered) as a PNG.
#pragma once
#include <array>
#include <cstdint>
#include <filesystem>

namespace lab::viewer {

// Throws RuntimeError naming the file when it cannot be written.
void save_framebuffer_png(const std::filesystem::path& file, int width, int height);
// One pixel of the back buffer, (x, y) from the top left.
std::array<uint8_t, 3> read_framebuffer_pixel(int x, int y, int height);

}  // namespace lab::viewer
