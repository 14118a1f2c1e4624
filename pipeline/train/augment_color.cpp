// RandomHSV: OpenCV's cvtColor RGB2HSV (integer, fixed point with 12 fraction bits) and HSV2RGB (float32)
// for 8-bit images, around the three lookup tables of Ultralytics.
#include "pipeline/train/augment_color.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>

namespace lab::train {
namespace {

constexpr int kHsvShift = 12;
constexpr int kHueRange = 180;

struct DivisionTables {
  std::array<int, 256> saturation{}, hue{};  // (255 << 12) / v and (180 << 12) / (6 * diff), rounded
};

const DivisionTables& division_tables() {
  static const DivisionTables tables = [] {
    DivisionTables t;
    for (int i = 1; i < 256; ++i) {
      t.saturation[size_t(i)] = int(std::lround((255 << kHsvShift) / double(i)));
      t.hue[size_t(i)] = int(std::lround((kHueRange << kHsvShift) / (6.0 * i)));
    }
    return t;
  }();
  return tables;
}

std::array<uint8_t, 3> rgb_to_hsv(int r, int g, int b) {
  const DivisionTables& t = division_tables();
  const int v = std::max({r, g, b}), diff = v - std::min({r, g, b});
  constexpr int kHalf = 1 << (kHsvShift - 1);
  const int s = (diff * t.saturation[size_t(v)] + kHalf) >> kHsvShift;
  int h = v == r ? g - b : v == g ? b - r + 2 * diff : r - g + 4 * diff;
  h = (h * t.hue[size_t(diff)] + kHalf) >> kHsvShift;
  if (h < 0) h += kHueRange;
  return {uint8_t(h), uint8_t(s), uint8_t(v)};
}

std::array<uint8_t, 3> hsv_to_rgb(int h8, int s8, int v8) {
  const float s = float(s8) * (1.f / 255), v = float(v8) * (1.f / 255);
  float r = v, g = v, b = v;
  if (s != 0) {
    float h = float(h8) * (6.f / kHueRange);
    int sector = int(std::floor(h));
    h -= float(sector);
    if (sector < 0 || sector >= 6) sector = 0, h = 0;
    const float tab[4] = {v, v * (1.f - s), v * (1.f - s * h), v * (1.f - s * (1.f - h))};
    // Which of tab (v, p, q, t) each of r, g, b takes in the six hue sectors.
    static constexpr int kSectors[6][3] = {{0, 3, 1}, {2, 0, 1}, {1, 0, 3}, {1, 2, 0}, {3, 1, 0}, {0, 1, 2}};
    r = tab[kSectors[sector][0]], g = tab[kSectors[sector][1]], b = tab[kSectors[sector][2]];
  }
  auto byte = [](float x) { return uint8_t(std::clamp(std::lrint(x * 255.f), 0L, 255L)); };
  return {byte(r), byte(g), byte(b)};
}

}  // namespace

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
    const std::array<uint8_t, 3> hsv = rgb_to_hsv(p[0], p[1], p[2]);
    const std::array<uint8_t, 3> rgb = hsv_to_rgb(hue[hsv[0]], saturation[hsv[1]], value[hsv[2]]);
    std::copy(rgb.begin(), rgb.end(), p);
  }
}

}  // namespace lab::train
