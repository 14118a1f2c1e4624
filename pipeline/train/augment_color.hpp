// Ultralytics' RandomHSV on RGB8 images: OpenCV's 8-bit RGB -> HSV (H in [0, 180), S and V in [0, 255]),
// three lookup tables (hue rotated by gain_h * 180, saturation and value scaled by 1 + gain, truncated to
// bytes as NumPy's astype does), then OpenCV's HSV -> RGB back to bytes.
#pragma once
#include "pipeline/image/image.hpp"

namespace lab::train {

struct HsvGains {
  double h = 0, s = 0, v = 0;  // the drawn gains, each in [-hsv_x, hsv_x]
};

void apply_hsv(Image& image, const HsvGains& gains);

}  // namespace lab::train
