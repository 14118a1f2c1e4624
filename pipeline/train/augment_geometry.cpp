// Resize, letterbox, mosaic, random affine (warp, box transform, box_candidates) and flip of training images.
#include "pipeline/train/augment_geometry.hpp"

#include <algorithm>
#include <cmath>
#include <numbers>

#include "pipeline/image/letterbox.hpp"

namespace lab::train {
namespace {

Matrix3 multiply(const Matrix3& a, const Matrix3& b) {
  Matrix3 c{};
  for (int i = 0; i < 3; ++i)
    for (int j = 0; j < 3; ++j)
      for (int k = 0; k < 3; ++k) c[size_t(i * 3 + j)] += a[size_t(i * 3 + k)] * b[size_t(k * 3 + j)];
  return c;
}

constexpr Matrix3 kIdentity{1, 0, 0, 0, 1, 0, 0, 0, 1};

// floor() without a library call (x86-64's baseline has no rounding instruction).
int floor_int(double v) {
  const int t = int(v);
  return t - int(v < t);
}

// The inverse by the adjugate (M is invertible: its scale gain is > 0).
Matrix3 inverse(const Matrix3& m) {
  const double a = m[0], b = m[1], c = m[2], d = m[3], e = m[4], f = m[5], g = m[6], h = m[7], i = m[8];
  const double det = a * (e * i - f * h) - b * (d * i - f * g) + c * (d * h - e * g);
  const double s = det != 0 ? 1 / det : 0;
  return {(e * i - f * h) * s, (c * h - b * i) * s, (b * f - c * e) * s,
          (f * g - d * i) * s, (a * i - c * g) * s, (c * d - a * f) * s,
          (d * h - e * g) * s, (b * g - a * h) * s, (a * e - b * d) * s};
}

loss::GtBox clipped(loss::GtBox b, double width, double height) {
  b.x1 = std::clamp(b.x1, 0.0, width), b.x2 = std::clamp(b.x2, 0.0, width);
  b.y1 = std::clamp(b.y1, 0.0, height), b.y2 = std::clamp(b.y2, 0.0, height);
  return b;
}

// Copies the rectangle [x1b, x2b) x [y1b, y2b) of `from` to (x1a, y1a) of `to`.
void paste(const Image& from, int x1b, int y1b, int x2b, int y2b, Image& to, int x1a, int y1a) {
  const size_t row_bytes = size_t(x2b - x1b) * 3;
  for (int y = y1b; y < y2b; ++y) std::copy_n(from.pixel(x1b, y), row_bytes, to.pixel(x1a, y1a + (y - y1b)));
}

}  // namespace

LabeledImage load_resized(const Image& decoded, const std::vector<loss::YoloLabel>& labels, int imgsz) {
  LabeledImage out;
  const double r = double(imgsz) / std::max(decoded.width, decoded.height);
  if (r != 1) {
    const int w = std::min(int(std::ceil(decoded.width * r)), imgsz);
    const int h = std::min(int(std::ceil(decoded.height * r)), imgsz);
    out.image = resize_bilinear(decoded, w, h);
  } else {
    out.image = decoded;
  }
  const double w = out.image.width, h = out.image.height;
  for (const loss::YoloLabel& l : labels)
    out.boxes.push_back(
        {l.cls, (l.cx - l.w / 2) * w, (l.cy - l.h / 2) * h, (l.cx + l.w / 2) * w, (l.cy + l.h / 2) * h});
  return out;
}

LabeledImage letterbox_square(const LabeledImage& in, int imgsz) {
  const LetterboxGeometry g = letterbox_geometry(in.image.width, in.image.height, imgsz, false);
  LabeledImage out{letterbox(in.image, g), {}};
  for (loss::GtBox b : in.boxes) {
    b.x1 = b.x1 * g.ratio + g.left, b.x2 = b.x2 * g.ratio + g.left;
    b.y1 = b.y1 * g.ratio + g.top, b.y2 = b.y2 * g.ratio + g.top;
    out.boxes.push_back(b);
  }
  return out;
}

LabeledImage mosaic4(const std::array<const LabeledImage*, 4>& tiles, int imgsz, int xc, int yc) {
  const int s2 = 2 * imgsz;
  LabeledImage out{Image(s2, s2, kAugmentPad), {}};
  for (int i = 0; i < 4; ++i) {
    const Image& img = tiles[size_t(i)]->image;
    const int w = img.width, h = img.height;
    int x1a, y1a, x2a, y2a, x1b, y1b, x2b, y2b;  // canvas rectangle a, tile rectangle b
    if (i == 0) {
      x1a = std::max(xc - w, 0), y1a = std::max(yc - h, 0), x2a = xc, y2a = yc;
      x1b = w - (x2a - x1a), y1b = h - (y2a - y1a), x2b = w, y2b = h;
    } else if (i == 1) {
      x1a = xc, y1a = std::max(yc - h, 0), x2a = std::min(xc + w, s2), y2a = yc;
      x1b = 0, y1b = h - (y2a - y1a), x2b = std::min(w, x2a - x1a), y2b = h;
    } else if (i == 2) {
      x1a = std::max(xc - w, 0), y1a = yc, x2a = xc, y2a = std::min(s2, yc + h);
      x1b = w - (x2a - x1a), y1b = 0, x2b = w, y2b = std::min(y2a - y1a, h);
    } else {
      x1a = xc, y1a = yc, x2a = std::min(xc + w, s2), y2a = std::min(s2, yc + h);
      x1b = 0, y1b = 0, x2b = std::min(w, x2a - x1a), y2b = std::min(y2a - y1a, h);
    }
    paste(img, x1b, y1b, x2b, y2b, out.image, x1a, y1a);
    const double pad_w = x1a - x1b, pad_h = y1a - y1b;
    for (const loss::GtBox& b : tiles[size_t(i)]->boxes) {
      const loss::GtBox moved =
          clipped({b.cls, b.x1 + pad_w, b.y1 + pad_h, b.x2 + pad_w, b.y2 + pad_h}, s2, s2);
      if (moved.x2 > moved.x1 && moved.y2 > moved.y1) out.boxes.push_back(moved);
    }
  }
  return out;
}

Matrix3 affine_matrix(int input_width, int input_height, int output_size, const AffineDraw& d) {
  constexpr double kRadian = std::numbers::pi / 180;
  const Matrix3 centre{1, 0, -input_width / 2.0, 0, 1, -input_height / 2.0, 0, 0, 1};
  const Matrix3 perspective{1, 0, 0, 0, 1, 0, d.perspective_x, d.perspective_y, 1};
  const double cos_a = std::cos(d.degrees * kRadian) * d.scale,
               sin_a = std::sin(d.degrees * kRadian) * d.scale;
  const Matrix3 rotation{cos_a, sin_a, 0, -sin_a, cos_a, 0, 0, 0, 1};
  const Matrix3 shear{1, std::tan(d.shear_x * kRadian), 0, std::tan(d.shear_y * kRadian), 1, 0, 0, 0, 1};
  const Matrix3 translation{1, 0, d.translate_x * output_size, 0, 1, d.translate_y * output_size, 0, 0, 1};
  return multiply(translation, multiply(shear, multiply(rotation, multiply(perspective, centre))));
}

Image warp_image(const Image& in, const Matrix3& m, int output_size) {
  const Matrix3 inv = inverse(m);
  Image out(output_size, output_size);
  const size_t row = size_t(in.width) * 3;
  const bool perspective = inv[6] != 0 || inv[7] != 0 || inv[8] != 1;
  for (int y = 0; y < output_size; ++y)
    for (int x = 0; x < output_size; ++x) {
      double sx = inv[0] * x + inv[1] * y + inv[2], sy = inv[3] * x + inv[4] * y + inv[5];
      if (perspective) {
        const double w = inv[6] * x + inv[7] * y + inv[8];
        sx /= w, sy /= w;
      }
      uint8_t* p = out.pixel(x, y);
      if (!(sx > -1 && sy > -1 && sx < in.width && sy < in.height)) {
        p[0] = p[1] = p[2] = kAugmentPad;
        continue;
      }
      const int x0 = floor_int(sx), y0 = floor_int(sy);
      const double fx = sx - x0, fy = sy - y0;
      // The four taps (x0, y0), (x0 + 1, y0), (x0, y0 + 1), (x0 + 1, y0 + 1); those outside read the border.
      const uint8_t* taps[4];
      static const uint8_t border[3] = {kAugmentPad, kAugmentPad, kAugmentPad};
      if (x0 >= 0 && y0 >= 0 && x0 + 1 < in.width && y0 + 1 < in.height) {
        taps[0] = in.pixel(x0, y0), taps[1] = taps[0] + 3, taps[2] = taps[0] + row, taps[3] = taps[2] + 3;
      } else {
        for (int k = 0; k < 4; ++k) {
          const int tx = x0 + (k & 1), ty = y0 + (k >> 1);
          taps[k] = tx >= 0 && ty >= 0 && tx < in.width && ty < in.height ? in.pixel(tx, ty) : border;
        }
      }
      for (int c = 0; c < 3; ++c) {
        const double v = (1 - fy) * ((1 - fx) * taps[0][c] + fx * taps[1][c]) +
                         fy * ((1 - fx) * taps[2][c] + fx * taps[3][c]);
        p[c] = uint8_t(std::min(v + 0.5, 255.0));  // v >= 0: rounded half up
      }
    }
  return out;
}

loss::GtBox transform_box(const loss::GtBox& box, const Matrix3& m) {
  const double xs[4] = {box.x1, box.x2, box.x1, box.x2}, ys[4] = {box.y1, box.y2, box.y2, box.y1};
  loss::GtBox out{box.cls, INFINITY, INFINITY, -INFINITY, -INFINITY};
  for (int k = 0; k < 4; ++k) {
    const double w = m[6] * xs[k] + m[7] * ys[k] + m[8];
    const double x = (m[0] * xs[k] + m[1] * ys[k] + m[2]) / w, y = (m[3] * xs[k] + m[4] * ys[k] + m[5]) / w;
    out.x1 = std::min(out.x1, x), out.x2 = std::max(out.x2, x);
    out.y1 = std::min(out.y1, y), out.y2 = std::max(out.y2, y);
  }
  return out;
}

bool box_candidate(const loss::GtBox& before, const loss::GtBox& after) {
  constexpr double kMinSide = 2, kMinAreaRatio = 0.1, kMaxAspect = 100, kEps = 1e-16;
  const double w1 = before.x2 - before.x1, h1 = before.y2 - before.y1;
  const double w2 = after.x2 - after.x1, h2 = after.y2 - after.y1;
  const double aspect = std::max(w2 / (h2 + kEps), h2 / (w2 + kEps));
  return w2 > kMinSide && h2 > kMinSide && w2 * h2 / (w1 * h1 + kEps) > kMinAreaRatio && aspect < kMaxAspect;
}

LabeledImage random_affine(const LabeledImage& in, int output_size, const AffineDraw& draw) {
  const Matrix3 m = affine_matrix(in.image.width, in.image.height, output_size, draw);
  const bool identity = m == kIdentity && in.image.width == output_size && in.image.height == output_size;
  LabeledImage out{identity ? in.image : warp_image(in.image, m, output_size), {}};
  for (const loss::GtBox& b : in.boxes) {
    const loss::GtBox after = clipped(transform_box(b, m), output_size, output_size);
    const loss::GtBox before{b.cls, b.x1 * draw.scale, b.y1 * draw.scale, b.x2 * draw.scale,
                             b.y2 * draw.scale};
    if (box_candidate(before, after)) out.boxes.push_back(after);
  }
  return out;
}

void flip_horizontal(LabeledImage& item) {
  Image& img = item.image;
  for (int y = 0; y < img.height; ++y)
    for (int x = 0; x < img.width / 2; ++x)
      std::swap_ranges(img.pixel(x, y), img.pixel(x, y) + 3, img.pixel(img.width - 1 - x, y));
  for (loss::GtBox& b : item.boxes) {
    const double x1 = img.width - b.x2, x2 = img.width - b.x1;
    b.x1 = x1, b.x2 = x2;
  }
}

}  // namespace lab::train
