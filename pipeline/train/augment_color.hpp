// Ultralytics' RandomHSV on RGB8 images: OpenCV's 8-bit RGB -> HSV (H in [0, 180), S and V in [0, 255]),
// three lookup tables (hue rotated by gain_h * 180, saturation and value scaled by 1 + gain, truncated to
// bytes as NumPy's astype does), then OpenCV's HSV -> RGB back to bytes.
#pragma once
#include <array>
#include <cstdint>

#include "pipeline/image/image.hpp"

namespace lab::train {

struct HsvGains {
  double h = 0, s = 0, v = 0;  // the drawn gains, each in [-hsv_x, hsv_x]
};

void apply_hsv(Image& image, const HsvGains& gains);

// OpenCV's cv2.cvtColor on 8-bit pixels, to the bit: RGB -> HSV (H in [0, 180), integer with 12 fraction
// bits) and HSV -> RGB as its vectorised AVX2 path computes it (float32 with fused multiply-adds, truncated),
// which converts every pixel of an image whose width is a multiple of 32 (640 among them).
std::array<uint8_t, 3> rgb_to_hsv8(int r, int g, int b);
std::array<uint8_t, 3> hsv8_to_rgb(int h, int s, int v);

}  // namespace lab::train
