// GlTexture: glTexImage2D of RGBA8 pixels (OpenGL 1.1 entry points, so no loader is needed).
#include "viewer/gl_texture.hpp"

#include <GL/gl.h>

#include <cstddef>

namespace lab::viewer {

GlTexture::~GlTexture() {
  if (id_ != 0) glDeleteTextures(1, &id_);
}

void GlTexture::upload(const std::vector<uint8_t>& rgba, int width, int height, bool smooth) {
  if (id_ == 0) glGenTextures(1, &id_);
  glBindTexture(GL_TEXTURE_2D, id_);
  const GLint filter = smooth ? GL_LINEAR : GL_NEAREST;
  glTexParameteri(GL_TEXTURE_2D, GL_TEXTURE_MIN_FILTER, filter);
  glTexParameteri(GL_TEXTURE_2D, GL_TEXTURE_MAG_FILTER, filter);
  glTexParameteri(GL_TEXTURE_2D, GL_TEXTURE_WRAP_S, GL_CLAMP_TO_EDGE);
  glTexParameteri(GL_TEXTURE_2D, GL_TEXTURE_WRAP_T, GL_CLAMP_TO_EDGE);
  glPixelStorei(GL_UNPACK_ALIGNMENT, 1);
  glTexImage2D(GL_TEXTURE_2D, 0, GL_RGBA, width, height, 0, GL_RGBA, GL_UNSIGNED_BYTE, rgba.data());
  width_ = width;
  height_ = height;
}

std::vector<uint8_t> rgba_from_rgb(const std::vector<uint8_t>& rgb) {
  std::vector<uint8_t> px(rgb.size() / 3 * 4, 255);
  for (size_t i = 0; i < rgb.size() / 3; ++i)
    for (size_t c = 0; c < 3; ++c) px[i * 4 + c] = rgb[i * 3 + c];
  return px;
}

}  // namespace lab::viewer
