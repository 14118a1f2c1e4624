// RandomHSV: OpenCV's cvtColor RGB2HSV (integer, fixed point with 12 fraction bits) and HSV2RGB (float32,
// truncated) for 8-bit images, around the three lookup tables of Ultralytics.
#include "pipeline/train/augment_color.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>

namespace lab::train {
namespace {

constexpr int kHsvShift = 12;
constexpr int kHueRange = 180;

struct HsvTables {
  std::array<int, 256> saturation{}, hue{};  // (255 << 12) / v and (180 << 12) / (6 * diff), rounded
  std::array<int, 256> sector{};             // per 8-bit hue: its sector of six and the fraction into it
  std::array<float, 256> fraction{};
};

HsvTables make_tables() {
  HsvTables t;
  for (int i = 0; i < 256; ++i) {
    if (i > 0) {
      t.saturation[size_t(i)] = int(std::lround((255 << kHsvShift) / double(i)));
      t.hue[size_t(i)] = int(std::lround((kHueRange << kHsvShift) / (6.0 * i)));
    }
    const float h = float(i) * (6.0f / kHueRange);
    t.sector[size_t(i)] = int(h) % 6;
    t.fraction[size_t(i)] = h - float(int(h));
  }
  return t;
}

const HsvTables kTables = make_tables();

// OpenCV's RGB2HSV_b, with its masks instead of branches (the pixels of a noisy image defeat prediction).
inline std::array<uint8_t, 3> to_hsv(int r, int g, int b) {
  const int v = std::max({r, g, b}), diff = v - std::min({r, g, b});
  constexpr int kHalf = 1 << (kHsvShift - 1);
  const int s = (diff * kTables.saturation[size_t(v)] + kHalf) >> kHsvShift;
  const int vr = -int(v == r), vg = -int(v == g);
  int h = (vr & (g - b)) + (~vr & ((vg & (b - r + 2 * diff)) + (~vg & (r - g + 4 * diff))));
  h = (h * kTables.hue[size_t(diff)] + kHalf) >> kHsvShift;
  h += kHueRange & -int(h < 0);
  return {uint8_t(h), uint8_t(s), uint8_t(v)};
}

// OpenCV's vectorised 8-bit HSV -> RGB (HSV2RGB_simd), which converts every pixel of an image whose width is
// a multiple of its block: float32, the sector by truncation, each channel truncated to a byte (all values
// lie in [0, 255.00002], so no clamp is needed).
inline std::array<uint8_t, 3> to_rgb(int h8, int s8, int v8) {
  const float s = float(s8) * (1.0f / 255.0f), v = float(v8) * (1.0f / 255.0f),
              f = kTables.fraction[size_t(h8)];
  // 1 - s * f with one rounding, as OpenCV's AVX2 build computes it (a fused multiply-add): exact in double
  // but for a double rounding that the full 8-bit table never meets.
  auto fused = [](float a, float b) { return float(1.0 - double(a) * double(b)); };
  const float tab[4] = {v, v * (1.f - s), v * fused(s, f), v * fused(s, 1.f - f)};
  // Which of tab (v, p, q, t) each of r, g, b takes in the six hue sectors.
  static constexpr int kSectors[6][3] = {{0, 3, 1}, {2, 0, 1}, {1, 0, 3}, {1, 2, 0}, {3, 1, 0}, {0, 1, 2}};
  const int* pick = kSectors[kTables.sector[size_t(h8)]];
  return {uint8_t(int(tab[pick[0]] * 255.0f)), uint8_t(int(tab[pick[1]] * 255.0f)),
          uint8_t(int(tab[pick[2]] * 255.0f))};
}

}  // namespace

std::array<uint8_t, 3> rgb_to_hsv8(int r, int g, int b) {
  return to_hsv(r, g, b);
}

std::array<uint8_t, 3> hsv8_to_rgb(int h, int s, int v) {
  return to_rgb(h, s, v);
}

void apply_hsv(Image& image, const HsvGains& gains) {
  std::array<uint8_t, 256> hue{}, saturation{}, value{};
  for (int x = 0; x < 256; ++x) {
    const double rotated = std::fmod(x + gains.h * kHueRange, double(kHueRange));
    hue[size_t(x)] = uint8_t(rotated < 0 ? rotated + kHueRange : rotated);
    saturation[size_t(x)] = uint8_t(std::clamp(x * (gains.s + 1), 0.0, 255.0));
    value[size_t(x)] = uint8_t(std::clamp(x * (gains.v + 1), 0.0, 255.0));
  }
  for (size_t i = 0; i < image.rgb.size(); i += 3) {
    uint8_t* p = image.rgb.data() + i;
    const std::array<uint8_t, 3> hsv = to_hsv(p[0], p[1], p[2]);
    const std::array<uint8_t, 3> rgb = to_rgb(hue[hsv[0]], saturation[hsv[1]], value[hsv[2]]);
    std::copy(rgb.begin(), rgb.end(), p);
  }
}

}  // namespace lab::train
