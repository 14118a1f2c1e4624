// Letterbox geometry, the OpenCV-exact bilinear resize, padding, NCHW conversion and the inverse box mapping.
#include "pipeline/image/letterbox.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>

#include "nvrtc_runtime/errors.hpp"

namespace lab {
namespace {

constexpr int kCoefBits = 11;  // OpenCV INTER_RESIZE_COEF_BITS
constexpr int kCoefScale = 1 << kCoefBits;

// Python's round(): half to even (the default floating-point rounding mode).
int round_half_even(double v) {
  return int(std::nearbyint(v));
}

// saturate_cast<short>(float) = cvRound (half to even) then clamp.
int16_t to_coefficient(float v) {
  const long r = std::lrint(v);
  return int16_t(std::clamp(r, long(INT16_MIN), long(INT16_MAX)));
}

}  // namespace

// Columns: OpenCV clamps the position itself (fx = 0 at both borders). Rows: it keeps fy and clamps the row
// indices instead. Both are reproduced exactly here, including the float arithmetic.
std::vector<LetterboxTap> resize_taps(int source_size, int target_size, bool columns) {
  const double scale = 1.0 / (double(target_size) / double(source_size));
  std::vector<LetterboxTap> taps(static_cast<size_t>(target_size));
  for (int d = 0; d < target_size; ++d) {
    float f = float((d + 0.5) * scale - 0.5);
    int s = int(std::floor(f));
    f -= float(s);
    LetterboxTap& tap = taps[size_t(d)];
    if (columns) {
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

namespace {

// OpenCV's vectorised vertical pass (VResizeLinearVec_32s8u), which produces every pixel of rows wider than
// one SIMD register: ((b0 * (S0 >> 4)) >> 16) + ((b1 * (S1 >> 4)) >> 16), then a rounding shift by 2 and a
// saturation to a byte. OpenCV also saturates S >> 4 to int16; a horizontal sum of bytes with two weights in
// [0, 2048] summing to at most 2049 is at most 255 x 2049 >> 4 = 32655, so that saturation never acts and
// is left out (the loop below then compiles to vector code).
uint8_t vertical_blend(int32_t s0, int32_t s1, int32_t b0, int32_t b1) {
  const int32_t h0 = ((s0 >> 4) * b0) >> 16;
  const int32_t h1 = ((s1 >> 4) * b1) >> 16;
  const int32_t v = (h0 + h1 + 2) >> 2;
  return uint8_t(v > 255 ? 255 : v);
}

// vertical_blend over a row, in blocks of 16 that the compiler turns into vector code.
void vertical_row(const int32_t* __restrict r0, const int32_t* __restrict r1, int32_t b0, int32_t b1,
                  uint8_t* __restrict out, size_t count) {
  size_t i = 0;
  for (; i + 16 <= count; i += 16)
    for (size_t k = i; k < i + 16; ++k) out[k] = vertical_blend(r0[k], r1[k], b0, b1);
  for (; i < count; ++i) out[i] = vertical_blend(r0[i], r1[i], b0, b1);
}

// Horizontal taps of the output columns as byte offsets into a source row.
struct ColumnTap {
  int offset0 = 0, offset1 = 0;
  int32_t weight0 = 0, weight1 = 0;
};

// OpenCV's two-pass resize, one output row at a time: `emit(y, row)` receives output row y (width x 3
// bytes). Output rows read source rows in increasing order, so the horizontal sums of the last two source
// rows are all that is kept, and each source row is filtered once.
template <class Emit>
void resize_rows(const Image& source, int width, int height, Emit&& emit) {
  if (source.width == width && source.height == height) {
    for (int y = 0; y < height; ++y) emit(y, source.pixel(0, y));
    return;
  }
  std::vector<ColumnTap> columns;
  for (const LetterboxTap& t : resize_taps(source.width, width, true))
    columns.push_back({t.index0 * 3, t.index1 * 3, t.weight0, t.weight1});
  const std::vector<LetterboxTap> ys = resize_taps(source.height, height, false);
  const size_t row_values = size_t(width) * 3;
  std::vector<int32_t> sums(row_values * 2);
  int32_t* rows[2] = {sums.data(), sums.data() + row_values};
  int cached[2] = {-1, -1};  // the source row each buffer holds
  // The buffer of source row sy, filtered on a miss into the buffer of the older row (never the row the
  // same output row fetched first: rows only advance, so the other buffer holds an earlier one).
  const auto horizontal = [&](int sy) -> const int32_t* {
    for (int k = 0; k < 2; ++k)
      if (cached[k] == sy) return rows[k];
    const int k = cached[0] < cached[1] ? 0 : 1;
    const uint8_t* in = source.pixel(0, sy);
    const ColumnTap* tap = columns.data();
    int32_t* __restrict out = rows[k];
    for (int x = 0; x < width; ++x, ++tap, out += 3) {
      const uint8_t* p0 = in + tap->offset0;
      const uint8_t* p1 = in + tap->offset1;
      const int32_t r = p0[0] * tap->weight0 + p1[0] * tap->weight1;
      const int32_t g = p0[1] * tap->weight0 + p1[1] * tap->weight1;
      const int32_t b = p0[2] * tap->weight0 + p1[2] * tap->weight1;
      out[0] = r, out[1] = g, out[2] = b;
    }
    cached[k] = sy;
    return rows[k];
  };
  std::vector<uint8_t> line(row_values);
  for (int y = 0; y < height; ++y) {
    const LetterboxTap& t = ys[size_t(y)];
    const int32_t* r0 = horizontal(t.index0);
    const int32_t* r1 = horizontal(t.index1);
    vertical_row(r0, r1, t.weight0, t.weight1, line.data(), row_values);
    emit(y, line.data());
  }
}

// value / 255 for every byte value: the network's input scale.
const std::array<float, 256>& byte_to_unit() {
  static const std::array<float, 256> table = [] {
    std::array<float, 256> t{};
    for (int v = 0; v < 256; ++v) t[size_t(v)] = float(v) / 255.0f;
    return t;
  }();
  return table;
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
  Image out(width, height);
  resize_rows(source, width, height,
              [&](int y, const uint8_t* row) { std::copy_n(row, size_t(width) * 3, out.pixel(0, y)); });
  return out;
}

Image letterbox(const Image& source, const LetterboxGeometry& g) {
  Image out(g.width, g.height, kLetterboxPad);
  resize_rows(source, g.resized_width, g.resized_height, [&](int y, const uint8_t* row) {
    std::copy_n(row, size_t(g.resized_width) * 3, out.pixel(g.left, g.top + y));
  });
  return out;
}

void letterbox_into_nchw(const Image& source, const LetterboxGeometry& g, float* out) {
  const size_t plane = size_t(g.width) * size_t(g.height);
  const std::array<float, 256>& unit = byte_to_unit();
  const float pad = unit[kLetterboxPad];
  const size_t right = size_t(g.left) + size_t(g.resized_width);
  for (size_t c = 0; c < 3; ++c) {
    float* p = out + c * plane;
    std::fill_n(p, size_t(g.top) * g.width, pad);
    for (int y = g.top; y < g.top + g.resized_height; ++y) {
      float* line = p + size_t(y) * g.width;
      std::fill_n(line, size_t(g.left), pad);
      std::fill(line + right, line + g.width, pad);
    }
    std::fill(p + size_t(g.top + g.resized_height) * g.width, p + plane, pad);
  }
  resize_rows(source, g.resized_width, g.resized_height, [&](int y, const uint8_t* row) {
    const size_t offset = size_t(g.top + y) * g.width + size_t(g.left);
    float* r = out + offset;
    float* gr = out + plane + offset;
    float* b = out + 2 * plane + offset;
    for (int x = 0; x < g.resized_width; ++x) {
      r[x] = unit[row[3 * x]];
      gr[x] = unit[row[3 * x + 1]];
      b[x] = unit[row[3 * x + 2]];
    }
  });
}

void write_nchw(const Image& image, float* out) {
  const size_t plane = size_t(image.width) * size_t(image.height);
  const std::array<float, 256>& unit = byte_to_unit();
  for (size_t i = 0; i < plane; ++i)
    for (size_t c = 0; c < 3; ++c) out[c * plane + i] = unit[image.rgb[i * 3 + c]];
}

void append_nchw(const Image& image, std::vector<float>& out) {
  const size_t base = out.size();
  out.resize(base + size_t(image.width) * size_t(image.height) * 3);
  write_nchw(image, out.data() + base);
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
