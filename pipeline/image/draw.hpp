// Annotating an image with detections: a rectangle per box (2-3 px, per-class colour from a fixed palette), a
// filled label background in the same colour and the label text in white, rendered with stb_easy_font at 2x.
#pragma once
#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "pipeline/image/image.hpp"

namespace lab {

struct BoxAnnotation {
  float x1 = 0, y1 = 0, x2 = 0, y2 = 0;  // source pixels
  int class_id = 0;                      // picks the colour
  std::string label;                     // "person 0.91"; empty: no label
};

using Rgb = std::array<uint8_t, 3>;

Rgb class_colour(int class_id);          // palette[class_id % 20]
int line_width_for(const Image& image);  // max(2, min(3, round((w + h) / 2 * 0.003)))

void draw_annotations(Image& image, const std::vector<BoxAnnotation>& boxes);

}  // namespace lab
