// Letterbox geometry, the OpenCV-exact bilinear resize, padding, NCHW conversion and the inverse box mapping.
#include "pipeline/image/letterbox.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>

#include "nvrtc_runtime/errors.hpp"

namespace lab {
namespace {

constexpr int kCoefBits = 11;  // OpenCV INTER_RESIZE_COEF_BITS
constexpr int kCoefScale = 1 << kCoefBits;
constexpr uint8_t kPadValue = 114;

// Python's round(): half to even (the default floating-point rounding mode).
int round_half_even(double v) {
  return int(std::nearbyint(v));
}

// saturate_cast<short>(float) = cvRound (half to even) then clamp.
int16_t to_coefficient(float v) {
  const long r = std::lrint(v);
  return int16_t(std::clamp(r, long(INT16_MIN), long(INT16_MAX)));
}

// One axis of OpenCV's resize tables: source index and fixed-point weights (w0 for index, w1 for index+1).
struct AxisTap {
  int index0 = 0, index1 = 0;
  int16_t weight0 = 0, weight1 = 0;
};

// Columns: OpenCV clamps the position itself (fx = 0 at both borders). Rows: it keeps fy and clamps the row
// indices instead. Both are reproduced exactly here, including the float arithmetic.
std::vector<AxisTap> axis_taps(int source_size, int target_size, bool clamp_position) {
  const double scale = 1.0 / (double(target_size) / double(source_size));
  std::vector<AxisTap> taps(static_cast<size_t>(target_size));
  for (int d = 0; d < target_size; ++d) {
    float f = float((d + 0.5) * scale - 0.5);
    int s = int(std::floor(f));
    f -= float(s);
    AxisTap& tap = taps[size_t(d)];
    if (clamp_position) {
      if (s < 0) f = 0, s = 0;
      if (s >= source_size - 1) f = 0, s = source_size - 1;
      tap.index0 = s;
      tap.index1 = std::min(s + 1, source_size - 1);
    } else {
      tap.index0 = std::clamp(s, 0, source_size - 1);
      tap.index1 = std::clamp(s + 1, 0, source_size - 1);
    }
    tap.weight0 = to_coefficient((1.f - f) * kCoefScale);
    tap.weight1 = to_coefficient(f * kCoefScale);
  }
  return taps;
}

// OpenCV's vectorised vertical pass (VResizeLinearVec_32s8u), which produces every pixel of rows wider than
// one SIMD register: ((b0 * (S0 >> 4)) >> 16) + ((b1 * (S1 >> 4)) >> 16), then a rounding shift by 2.
uint8_t vertical_blend(int32_t s0, int32_t s1, int16_t b0, int16_t b1) {
  const int32_t h0 = (int32_t(int16_t(std::clamp(s0 >> 4, -32768, 32767))) * b0) >> 16;
  const int32_t h1 = (int32_t(int16_t(std::clamp(s1 >> 4, -32768, 32767))) * b1) >> 16;
  return uint8_t(std::clamp((h0 + h1 + 2) >> 2, 0, 255));
}

}  // namespace

LetterboxGeometry letterbox_geometry(int width, int height, int imgsz, bool rect, int stride) {
  if (width <= 0 || height <= 0) throw UsageError("letterbox: empty image");
  if (imgsz <= 0 || stride <= 0) throw UsageError("letterbox: imgsz and stride must be positive");
  LetterboxGeometry g;
  g.source_width = width;
  g.source_height = height;
  g.ratio = std::min(double(imgsz) / height, double(imgsz) / width);
  g.resized_width = std::max(1, round_half_even(width * g.ratio));
  g.resized_height = std::max(1, round_half_even(height * g.ratio));
  int pad_w = imgsz - g.resized_width, pad_h = imgsz - g.resized_height;
  if (rect) pad_w %= stride, pad_h %= stride;
  const double half_w = pad_w / 2.0, half_h = pad_h / 2.0;
  g.left = round_half_even(half_w - 0.1);
  g.top = round_half_even(half_h - 0.1);
  g.width = g.resized_width + g.left + round_half_even(half_w + 0.1);
  g.height = g.resized_height + g.top + round_half_even(half_h + 0.1);
  return g;
}

Image resize_bilinear(const Image& source, int width, int height) {
  if (source.width == width && source.height == height) return source;
  const std::vector<AxisTap> xs = axis_taps(source.width, width, true);
  const std::vector<AxisTap> ys = axis_taps(source.height, height, false);

  // Horizontal pass into int rows (value * 2048), cached per source row.
  std::vector<int32_t> rows(size_t(source.height) * size_t(width) * 3);
  std::vector<bool> done(size_t(source.height), false);
  auto horizontal = [&](int sy) -> const int32_t* {
    int32_t* row = rows.data() + size_t(sy) * size_t(width) * 3;
    if (done[size_t(sy)]) return row;
    for (int x = 0; x < width; ++x) {
      const AxisTap& t = xs[size_t(x)];
      const uint8_t* p0 = source.pixel(t.index0, sy);
      const uint8_t* p1 = source.pixel(t.index1, sy);
      for (int c = 0; c < 3; ++c) row[x * 3 + c] = p0[c] * t.weight0 + p1[c] * t.weight1;
    }
    done[size_t(sy)] = true;
    return row;
  };

  Image out(width, height);
  for (int y = 0; y < height; ++y) {
    const AxisTap& t = ys[size_t(y)];
    const int32_t* r0 = horizontal(t.index0);
    const int32_t* r1 = horizontal(t.index1);
    uint8_t* dst = out.pixel(0, y);
    for (int i = 0; i < width * 3; ++i) dst[i] = vertical_blend(r0[i], r1[i], t.weight0, t.weight1);
  }
  return out;
}

Image letterbox(const Image& source, const LetterboxGeometry& g) {
  const Image resized = resize_bilinear(source, g.resized_width, g.resized_height);
  Image out(g.width, g.height, kPadValue);
  for (int y = 0; y < resized.height; ++y)
    std::copy_n(resized.pixel(0, y), size_t(resized.width) * 3, out.pixel(g.left, g.top + y));
  return out;
}

void append_nchw(const Image& image, std::vector<float>& out) {
  const size_t plane = size_t(image.width) * size_t(image.height);
  const size_t base = out.size();
  out.resize(base + plane * 3);
  for (size_t i = 0; i < plane; ++i)
    for (size_t c = 0; c < 3; ++c) out[base + c * plane + i] = float(image.rgb[i * 3 + c]) / 255.0f;
}

Box scale_box_to_source(const Box& box, const LetterboxGeometry& g) {
  const double gain = std::min(double(g.height) / g.source_height, double(g.width) / g.source_width);
  const double pad_x = round_half_even((g.width - g.source_width * gain) / 2 - 0.1);
  const double pad_y = round_half_even((g.height - g.source_height * gain) / 2 - 0.1);
  auto map = [&](float v, double pad, int limit) {
    return float(std::clamp((double(v) - pad) / gain, 0.0, double(limit)));
  };
  return {map(box.x1, pad_x, g.source_width), map(box.y1, pad_y, g.source_height),
          map(box.x2, pad_x, g.source_width), map(box.y2, pad_y, g.source_height)};
}

}  // namespace lab
