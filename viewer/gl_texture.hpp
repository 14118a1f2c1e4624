// An RGBA8 OpenGL texture owned by one object (created on first upload, deleted with the object), and the
// RGB -> RGBA conversion the image views upload through.
#pragma once
#include <cstdint>
#include <vector>

namespace lab::viewer {

class GlTexture {
 public:
  GlTexture() = default;
  GlTexture(const GlTexture&) = delete;
  GlTexture& operator=(const GlTexture&) = delete;
  ~GlTexture();

  // `rgba`: width * height * 4 bytes, row major, top row first. `smooth`: linear filtering, else nearest.
  void upload(const std::vector<uint8_t>& rgba, int width, int height, bool smooth = false);
  bool empty() const { return id_ == 0; }
  void* imgui_id() const { return reinterpret_cast<void*>(static_cast<uintptr_t>(id_)); }
  int width() const { return width_; }
  int height() const { return height_; }

 private:
  unsigned id_ = 0;
  int width_ = 0, height_ = 0;
};

// Opaque RGBA8 pixels of RGB8 ones (3 bytes per pixel, row major), for upload().
std::vector<uint8_t> rgba_from_rgb(const std::vector<uint8_t>& rgb);

}  // namespace lab::viewer
