// Box and label drawing on RGB8 images. Everything is clipped to the image, so boxes touching or crossing
// the border are safe.
#include "pipeline/image/draw.hpp"

#include <algorithm>
#include <cmath>

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunused-function"
#include <stb_easy_font.h>
#pragma GCC diagnostic pop

namespace lab {
namespace {

constexpr int kTextScale = 2;
constexpr int kTextPadding = 3;  // pixels around the text inside its background (at the final scale)

// Twenty well-separated colours (the palette Ultralytics' plots use), RGB.
constexpr std::array<Rgb, 20> kPalette = {{{255, 56, 56},  {255, 157, 151}, {255, 112, 31},  {255, 178, 29},
                                           {207, 210, 49}, {72, 249, 10},   {146, 204, 23},  {61, 219, 134},
                                           {26, 147, 52},  {0, 212, 187},   {44, 153, 168},  {0, 194, 255},
                                           {52, 69, 147},  {100, 115, 255}, {0, 24, 236},    {132, 56, 255},
                                           {82, 0, 133},   {203, 56, 255},  {255, 149, 200}, {255, 55, 199}}};

void fill_rect(Image& image, int x0, int y0, int x1, int y1, const Rgb& colour) {
  x0 = std::max(x0, 0), y0 = std::max(y0, 0);
  x1 = std::min(x1, image.width), y1 = std::min(y1, image.height);
  for (int y = y0; y < y1; ++y)
    for (int x = x0; x < x1; ++x) std::copy(colour.begin(), colour.end(), image.pixel(x, y));
}

// The outline drawn inside [x0, x1) x [y0, y1) with the given thickness.
void outline_rect(Image& image, int x0, int y0, int x1, int y1, int thickness, const Rgb& colour) {
  fill_rect(image, x0, y0, x1, y0 + thickness, colour);
  fill_rect(image, x0, y1 - thickness, x1, y1, colour);
  fill_rect(image, x0, y0, x0 + thickness, y1, colour);
  fill_rect(image, x1 - thickness, y0, x1, y1, colour);
}

// stb_easy_font quads (4 vertices of x, y, z floats + 4 colour bytes) filled at kTextScale from (x, y).
void draw_text(Image& image, int x, int y, const std::string& text, const Rgb& colour) {
  std::vector<char> buffer(text.size() * 300 + 64);  // ~270 bytes per character, per stb_easy_font
  std::string mutable_text = text;
  const int quads =
      stb_easy_font_print(0, 0, mutable_text.data(), nullptr, buffer.data(), int(buffer.size()));
  struct Vertex {
    float x, y, z;
    unsigned char rgba[4];
  };
  const auto* vertices = reinterpret_cast<const Vertex*>(buffer.data());
  for (int q = 0; q < quads; ++q) {
    const Vertex* v = vertices + q * 4;
    const float qx0 = std::min({v[0].x, v[1].x, v[2].x, v[3].x}),
                qx1 = std::max({v[0].x, v[1].x, v[2].x, v[3].x});
    const float qy0 = std::min({v[0].y, v[1].y, v[2].y, v[3].y}),
                qy1 = std::max({v[0].y, v[1].y, v[2].y, v[3].y});
    fill_rect(image, x + int(std::lround(qx0 * kTextScale)), y + int(std::lround(qy0 * kTextScale)),
              x + int(std::lround(qx1 * kTextScale)), y + int(std::lround(qy1 * kTextScale)), colour);
  }
}

}  // namespace

Rgb class_colour(int class_id) {
  return kPalette[size_t(std::abs(class_id)) % kPalette.size()];
}

int line_width_for(const Image& image) {
  const int w = int(std::lround((image.width + image.height) / 2.0 * 0.003));
  return std::clamp(w, 2, 3);
}

void draw_annotations(Image& image, const std::vector<BoxAnnotation>& boxes) {
  const int thickness = line_width_for(image);
  for (const BoxAnnotation& b : boxes) {
    const Rgb colour = class_colour(b.class_id);
    // Corners clamped into the image, so a box reaching past the border still shows all four edges.
    const int x0 = std::clamp(int(std::lround(b.x1)), 0, image.width - 1);
    const int y0 = std::clamp(int(std::lround(b.y1)), 0, image.height - 1);
    const int x1 = std::clamp(int(std::lround(b.x2)), x0 + 1, image.width);
    const int y1 = std::clamp(int(std::lround(b.y2)), y0 + 1, image.height);
    outline_rect(image, x0, y0, x1, y1, thickness, colour);
    if (b.label.empty()) continue;

    std::string text = b.label;
    const int text_w = stb_easy_font_width(text.data()) * kTextScale;
    const int text_h = 7 * kTextScale;  // glyph cap height of stb_easy_font (descenders fit in the padding)
    const int box_w = text_w + 2 * kTextPadding, box_h = text_h + 2 * kTextPadding;
    // Above the box when it fits, else just inside its top edge; kept inside the image horizontally.
    const int label_y = y0 - box_h >= 0 ? y0 - box_h : std::max(y0, 0);
    const int label_x = std::clamp(x0, 0, std::max(0, image.width - box_w));
    fill_rect(image, label_x, label_y, label_x + box_w, label_y + box_h, colour);
    draw_text(image, label_x + kTextPadding, label_y + kTextPadding, text, {255, 255, 255});
  }
}

}  // namespace lab
