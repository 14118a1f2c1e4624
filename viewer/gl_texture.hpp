// An RGBA8 OpenGL texture owned by one object (created on first upload, deleted with the object).
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

}  // namespace lab::viewer
