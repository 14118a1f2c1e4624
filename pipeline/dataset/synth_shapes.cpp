// Shapes as inside-tests on the unit square of their box, sampled 4x4 per pixel; backgrounds as per-pixel
// functions of position.
#include "pipeline/dataset/synth_shapes.hpp"

#include <algorithm>
#include <cmath>

namespace lab::dataset {
namespace {

struct Point {
  double x, y;
};

// Even-odd rule.
bool inside_polygon(const std::vector<Point>& polygon, double x, double y) {
  bool inside = false;
  for (size_t i = 0, j = polygon.size() - 1; i < polygon.size(); j = i++) {
    const Point& a = polygon[i];
    const Point& b = polygon[j];
    if ((a.y > y) != (b.y > y) && x < (b.x - a.x) * (y - a.y) / (b.y - a.y) + a.x) inside = !inside;
  }
  return inside;
}

// A five-pointed star stretched so that its points touch the four sides of the unit square.
std::vector<Point> unit_star() {
  std::vector<Point> points;
  const double pi = 3.14159265358979323846;
  for (int k = 0; k < 10; ++k) {
    const double radius = k % 2 == 0 ? 1.0 : 0.42, angle = -pi / 2 + k * pi / 5;
    points.push_back({radius * std::cos(angle), radius * std::sin(angle)});
  }
  double x0 = 1e9, x1 = -1e9, y0 = 1e9, y1 = -1e9;
  for (const Point& p : points) {
    x0 = std::min(x0, p.x), x1 = std::max(x1, p.x), y0 = std::min(y0, p.y), y1 = std::max(y1, p.y);
  }
  for (Point& p : points) p = {(p.x - x0) / (x1 - x0), (p.y - y0) / (y1 - y0)};
  return points;
}

// Whether (u, v) in [0, 1]^2 is inside shape `shape`.
bool inside_shape(int shape, double u, double v) {
  static const std::vector<Point> star = unit_star();
  static const std::vector<Point> hexagon = {{0.25, 0}, {0.75, 0}, {1, 0.5}, {0.75, 1}, {0.25, 1}, {0, 0.5}};
  const double x = 2 * u - 1, y = 2 * v - 1, r2 = x * x + y * y;
  switch (shape) {
    case 0:
      return r2 <= 1;  // circle
    case 1:
      return true;  // square
    case 2:
      return std::abs(x) <= v;  // triangle, apex up
    case 3:
      return inside_polygon(star, u, v);  // star
    case 4:
      return inside_polygon(hexagon, u, v);  // hexagon
    case 5:
      return std::abs(x) <= 1.0 / 3 || std::abs(y) <= 1.0 / 3;  // cross
    case 6:
      return std::abs(x) + std::abs(y) <= 1;  // diamond
    default:
      return r2 <= 1 && r2 >= 0.55 * 0.55;  // ring
  }
}

uint8_t blend(uint8_t under, uint8_t over, double alpha) {
  return uint8_t(std::lround(under + (over - under) * alpha));
}

uint8_t clamp_byte(double v) {
  return uint8_t(std::clamp(std::lround(v), 0L, 255L));
}

}  // namespace

const std::vector<std::string>& shape_names() {
  static const std::vector<std::string> names = {"circle",  "square", "triangle", "star",
                                                 "hexagon", "cross",  "diamond",  "ring"};
  return names;
}

void draw_shape(Image& image, int shape, const ShapeBox& box, const std::array<uint8_t, 3>& colour) {
  constexpr int kSamples = 4;
  for (int py = std::max(0, box.y); py < std::min(image.height, box.y + box.h); ++py)
    for (int px = std::max(0, box.x); px < std::min(image.width, box.x + box.w); ++px) {
      int hits = 0;
      for (int sy = 0; sy < kSamples; ++sy)
        for (int sx = 0; sx < kSamples; ++sx)
          hits += inside_shape(shape, (px - box.x + (sx + 0.5) / kSamples) / box.w,
                               (py - box.y + (sy + 0.5) / kSamples) / box.h);
      if (hits == 0) continue;
      const double alpha = double(hits) / (kSamples * kSamples);
      uint8_t* p = image.pixel(px, py);
      for (int c = 0; c < 3; ++c) p[c] = blend(p[c], colour[size_t(c)], alpha);
    }
}

uint64_t SynthRandom::next() {
  uint64_t z = (state_ += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

double SynthRandom::uniform() {
  return double(next() >> 11) * 0x1.0p-53;
}

int SynthRandom::integer(int low, int high) {
  return low + int(next() % uint64_t(high - low + 1));
}

std::array<uint8_t, 3> SynthRandom::colour() {
  return {uint8_t(next() & 255), uint8_t(next() & 255), uint8_t(next() & 255)};
}

void draw_background(Image& image, SynthRandom& random) {
  const std::array<uint8_t, 3> a = random.colour(), b = random.colour();
  const int texture = random.integer(0, 2);  // 0 noise, 1 gradient, 2 stripes
  const double angle = random.uniform() * 3.14159265358979323846;
  const double dx = std::cos(angle), dy = std::sin(angle);
  const double period = 8 + random.uniform() * 40;
  const double noise = texture == 0 ? 40 + random.uniform() * 40 : 4 + random.uniform() * 12;
  const double extent = std::abs(dx) * image.width + std::abs(dy) * image.height;
  const double origin = std::min(0.0, dx * image.width) + std::min(0.0, dy * image.height);
  for (int y = 0; y < image.height; ++y)
    for (int x = 0; x < image.width; ++x) {
      const double along = x * dx + y * dy;
      double mix = 0;  // share of colour b
      if (texture == 1) mix = (along - origin) / std::max(1.0, extent);
      if (texture == 2) mix = std::fmod(along - origin, period) < period / 2 ? 0 : 1;
      uint8_t* p = image.pixel(x, y);
      for (int c = 0; c < 3; ++c)
        p[c] =
            clamp_byte(a[size_t(c)] + (b[size_t(c)] - a[size_t(c)]) * mix + (random.uniform() - 0.5) * noise);
    }
}

}  // namespace lab::dataset
