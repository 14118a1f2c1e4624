// The training augmentations one by one, against expectations worked out by hand or by a float64 reference
// written here: flip and translate exact on hand examples, box_candidates' rules on hand cases, the four
// mosaic tiles in their quadrants, every box still tight around its filled rectangle after each geometric
// step, RandomHSV against a textbook HSV conversion with Ultralytics' lookup tables, and the 8-bit HSV
// conversions against values OpenCV computed.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <random>

#include "pipeline/train/augment_color.hpp"
#include "pipeline/train/augment_geometry.hpp"
#include "pipeline/train/augment_pipeline.hpp"

using namespace lab;
using namespace lab::train;
using Colour = std::array<uint8_t, 3>;

namespace {

// A width x height image of grey 114 with filled rectangles [x1, x2) x [y1, y2) in distinct colours and their
// boxes (class = the rectangle's index).
struct Rect {
  int x1, y1, x2, y2;
  Colour colour;
};

LabeledImage draw_rects(int width, int height, const std::vector<Rect>& rects) {
  LabeledImage out{Image(width, height, 114), {}};
  for (size_t k = 0; k < rects.size(); ++k) {
    const Rect& r = rects[k];
    for (int y = r.y1; y < r.y2; ++y)
      for (int x = r.x1; x < r.x2; ++x) std::copy(r.colour.begin(), r.colour.end(), out.image.pixel(x, y));
    out.boxes.push_back({int(k), double(r.x1), double(r.y1), double(r.x2), double(r.y2)});
  }
  return out;
}

// The pixels of exactly `colour` lie inside `box` (one pixel of slack for the half-pixel offset between pixel
// centres and box edges) and reach each of its edges within `slack` pixels.
void check_tight(const Image& image, const Colour& colour, const loss::GtBox& box, double slack) {
  int x1 = image.width, y1 = image.height, x2 = -1, y2 = -1;
  for (int y = 0; y < image.height; ++y)
    for (int x = 0; x < image.width; ++x)
      if (std::equal(colour.begin(), colour.end(), image.pixel(x, y)))
        x1 = std::min(x1, x), y1 = std::min(y1, y), x2 = std::max(x2, x), y2 = std::max(y2, y);
  INFO("class " << box.cls << " box " << box.x1 << " " << box.y1 << " " << box.x2 << " " << box.y2
                << ", pixels " << x1 << " " << y1 << " " << x2 << " " << y2);
  REQUIRE(x2 >= 0);
  CHECK(x1 >= box.x1 - 1);
  CHECK(y1 >= box.y1 - 1);
  CHECK(x2 + 1 <= box.x2 + 1);
  CHECK(y2 + 1 <= box.y2 + 1);
  CHECK(x1 <= box.x1 + slack);
  CHECK(y1 <= box.y1 + slack);
  CHECK(x2 + 1 >= box.x2 - slack);
  CHECK(y2 + 1 >= box.y2 - slack);
}

const std::vector<Rect> kRects = {{4, 5, 20, 15, {250, 10, 10}},
                                  {30, 8, 44, 30, {10, 240, 20}},
                                  {8, 30, 26, 44, {20, 30, 230}},
                                  {34, 36, 46, 45, {240, 230, 0}}};

}  // namespace

TEST_CASE("train augment: horizontal flip mirrors pixels and boxes exactly", "[train_loader]") {
  LabeledImage item = draw_rects(10, 3, {{1, 0, 4, 2, {200, 0, 0}}});
  item.image.pixel(0, 2)[1] = 7;
  const LabeledImage before = item;
  flip_horizontal(item);
  for (int y = 0; y < 3; ++y)
    for (int x = 0; x < 10; ++x)
      CHECK(std::equal(item.image.pixel(x, y), item.image.pixel(x, y) + 3, before.image.pixel(9 - x, y)));
  REQUIRE(item.boxes.size() == 1);
  CHECK(item.boxes[0].x1 == 6);  // 10 - 4
  CHECK(item.boxes[0].x2 == 9);  // 10 - 1
  CHECK(item.boxes[0].y1 == 0);
  CHECK(item.boxes[0].y2 == 2);
}

TEST_CASE("train augment: a pure translation moves pixels and boxes by whole pixels", "[train_loader]") {
  // 20 x 20, translate_x 0.6 and translate_y 0.45: the centre moves from (10, 10) to (12, 9).
  const LabeledImage in = draw_rects(20, 20, {{3, 4, 10, 12, {0, 0, 200}}});
  AffineDraw draw;
  draw.translate_x = 0.6, draw.translate_y = 0.45;
  const LabeledImage out = random_affine(in, 20, draw);
  for (int y = 0; y < 20; ++y)
    for (int x = 0; x < 20; ++x) {
      const int sx = x - 2, sy = y + 1;
      const bool inside = sx >= 0 && sy >= 0 && sx < 20 && sy < 20;
      for (int c = 0; c < 3; ++c)
        CHECK(int(out.image.pixel(x, y)[c]) == (inside ? int(in.image.pixel(sx, sy)[c]) : 114));
    }
  REQUIRE(out.boxes.size() == 1);
  CHECK(out.boxes[0].x1 == 5);
  CHECK(out.boxes[0].y1 == 3);
  CHECK(out.boxes[0].x2 == 12);
  CHECK(out.boxes[0].y2 == 11);
}

TEST_CASE("train augment: scale about the centre, boxes clipped, then dropped when mostly gone",
          "[train_loader]") {
  // 40 x 40 at gain 2 about (20, 20): x' = 2 (x - 20) + 20.
  const LabeledImage in =
      draw_rects(40, 40, {{15, 15, 25, 22, {9, 9, 9}}, {0, 0, 8, 8, {1, 1, 1}}, {2, 16, 12, 24, {2, 2, 2}}});
  AffineDraw draw;
  draw.scale = 2;
  const LabeledImage out = random_affine(in, 40, draw);
  // Box 0: (10, 10, 30, 24). Box 1: (-20, -20, -4, -4) clipped to nothing: dropped. Box 2: (-16, 12, 4, 28)
  // clipped to (0, 12, 4, 28): 4 x 16 of 20 x 16 (2 x its 10 x 8) keeps 20 % > 10 %: kept.
  REQUIRE(out.boxes.size() == 2);
  CHECK(out.boxes[0].cls == 0);
  CHECK(out.boxes[0].x1 == 10);
  CHECK(out.boxes[0].y1 == 10);
  CHECK(out.boxes[0].x2 == 30);
  CHECK(out.boxes[0].y2 == 24);
  CHECK(out.boxes[1].cls == 2);
  CHECK(out.boxes[1].x1 == 0);
  CHECK(out.boxes[1].y1 == 12);
  CHECK(out.boxes[1].x2 == 4);
  CHECK(out.boxes[1].y2 == 28);
  // Output pixel (20, 20) samples input (20, 20); (11, 11) samples (15.5, 15.5), inside rectangle 0.
  CHECK(int(out.image.pixel(20, 20)[0]) == 9);
  CHECK(int(out.image.pixel(11, 11)[0]) == 9);
}

TEST_CASE("train augment: box_candidates keeps boxes by side, area ratio and aspect", "[train_loader]") {
  const loss::GtBox before{0, 0, 0, 100, 100};
  CHECK(box_candidate(before, {0, 0, 0, 50, 50}));               // 25 % of the area
  CHECK_FALSE(box_candidate(before, {0, 0, 0, 30, 30}));         // 9 %
  CHECK(box_candidate(before, {0, 0, 0, 32, 32}));               // 10.24 %
  CHECK_FALSE(box_candidate({0, 0, 0, 4, 4}, {0, 0, 0, 2, 4}));  // 2 px wide is not > 2
  CHECK(box_candidate({0, 0, 0, 4, 4}, {0, 0, 0, 2.5, 4}));
  CHECK_FALSE(box_candidate({0, 0, 0, 4, 4}, {0, 0, 0, 4, 1.5}));    // too low
  CHECK_FALSE(box_candidate({0, 0, 0, 500, 4}, {0, 0, 0, 400, 4}));  // aspect 100
  CHECK(box_candidate({0, 0, 0, 500, 4}, {0, 0, 0, 396, 4}));        // aspect 99
}

TEST_CASE("train augment: mosaic places the four tiles' boxes in their quadrants", "[train_loader]") {
  // imgsz 16: a 32 x 32 canvas, centre (12, 20). Tiles of 16 x 16, 16 x 10, 12 x 16, 16 x 16.
  const LabeledImage t0 = draw_rects(16, 16, {{2, 3, 10, 12, {1, 0, 0}}});
  const LabeledImage t1 = draw_rects(16, 10, {{1, 1, 6, 9, {2, 0, 0}}});
  const LabeledImage t2 = draw_rects(12, 16, {{4, 2, 12, 6, {3, 0, 0}}});
  const LabeledImage t3 = draw_rects(16, 16, {{0, 0, 16, 16, {4, 0, 0}}});
  const LabeledImage m = mosaic4({&t0, &t1, &t2, &t3}, 16, 12, 20);
  REQUIRE(m.image.width == 32);
  REQUIRE(m.boxes.size() == 4);
  // Tile 0 ends at the centre: moved by (12 - 16, 20 - 16) = (-4, 4), clipped at x 0.
  CHECK(m.boxes[0].x1 == 0);
  CHECK(m.boxes[0].y1 == 7);
  CHECK(m.boxes[0].x2 == 6);
  CHECK(m.boxes[0].y2 == 16);
  // Tile 1 starts at x 12 and ends at y 20: moved by (12, 10).
  CHECK(m.boxes[1].x1 == 13);
  CHECK(m.boxes[1].y1 == 11);
  CHECK(m.boxes[1].x2 == 18);
  CHECK(m.boxes[1].y2 == 19);
  // Tile 2 ends at x 12 and starts at y 20: moved by (0, 20).
  CHECK(m.boxes[2].x1 == 4);
  CHECK(m.boxes[2].y1 == 22);
  CHECK(m.boxes[2].x2 == 12);
  CHECK(m.boxes[2].y2 == 26);
  // Tile 3 starts at the centre, cut by the canvas: (12, 20) to (28, 32).
  CHECK(m.boxes[3].x1 == 12);
  CHECK(m.boxes[3].y1 == 20);
  CHECK(m.boxes[3].x2 == 28);
  CHECK(m.boxes[3].y2 == 32);
  CHECK(int(m.image.pixel(0, 8)[0]) == 1);      // tile 0's (4, 4)
  CHECK(int(m.image.pixel(13, 11)[0]) == 2);    // tile 1's (1, 1)
  CHECK(int(m.image.pixel(27, 31)[0]) == 4);    // tile 3's (15, 11)
  CHECK(int(m.image.pixel(30, 31)[0]) == 114);  // right of tile 3: canvas
  CHECK(int(m.image.pixel(0, 0)[0]) == 114);    // above tile 0: canvas
}

TEST_CASE("train augment: every box stays tight around its rectangle after each geometric step",
          "[train_loader]") {
  const LabeledImage base = draw_rects(48, 48, kRects);
  auto check_all = [](const LabeledImage& item, const std::vector<Colour>& colours, double slack) {
    REQUIRE(item.boxes.size() == colours.size());
    for (size_t k = 0; k < colours.size(); ++k) check_tight(item.image, colours[k], item.boxes[k], slack);
  };
  std::vector<Colour> colours;
  for (const Rect& r : kRects) colours.push_back(r.colour);

  SECTION("letterbox of a wide image (resized to 64 x 32, 16 rows of padding above)") {
    const LabeledImage wide = draw_rects(96, 48, kRects);
    check_all(letterbox_square(wide, 64), colours, 2);
  }
  SECTION("resize for training, then letterbox") {
    std::vector<loss::YoloLabel> labels;
    for (const loss::GtBox& b : base.boxes)
      labels.push_back(
          {b.cls, (b.x1 + b.x2) / 96, (b.y1 + b.y2) / 96, (b.x2 - b.x1) / 48, (b.y2 - b.y1) / 48});
    check_all(letterbox_square(load_resized(base.image, labels, 96), 96), colours, 2);
  }
  SECTION("affine: scale and translate") {
    for (const double scale : {0.6, 1.0, 1.4}) {
      AffineDraw draw;
      draw.scale = scale, draw.translate_x = 0.55, draw.translate_y = 0.43;
      const LabeledImage out = random_affine(base, 48, draw);
      INFO("scale " << scale);
      for (const loss::GtBox& b : out.boxes) check_tight(out.image, colours[size_t(b.cls)], b, 2);
      CHECK(out.boxes.size() >= 2);
    }
  }
  SECTION("affine: rotation by 90 degrees") {
    AffineDraw draw;
    draw.degrees = 90;
    check_all(random_affine(base, 48, draw), colours, 1.5);
  }
  SECTION("mosaic then the affine crop") {
    LabeledImage tiles[4];
    std::vector<Colour> tile_colours;
    for (int t = 0; t < 4; ++t) {
      const Colour c{uint8_t(40 + 50 * t), uint8_t(200 - 40 * t), uint8_t(17 * t)};
      tiles[t] = draw_rects(48, 48, {{4, 4, 44, 44, c}});
      tile_colours.push_back(c);
    }
    const LabeledImage m = mosaic4({&tiles[0], &tiles[1], &tiles[2], &tiles[3]}, 48, 48, 48);
    for (size_t k = 0; k < 4; ++k) check_tight(m.image, tile_colours[k], m.boxes[k], 0);
    AffineDraw draw;
    draw.scale = 1.2;
    const LabeledImage out = random_affine(m, 48, draw);  // x' = 1.2 (x - 48) + 24: each keeps 16 %
    REQUIRE(out.boxes.size() == 4);
    for (size_t k = 0; k < 4; ++k) check_tight(out.image, tile_colours[k], out.boxes[k], 2);
  }
  SECTION("flip") {
    LabeledImage flipped = base;
    flip_horizontal(flipped);
    check_all(flipped, colours, 0);
  }
}

namespace {

// Textbook HSV in float64: H in degrees, S and V in [0, 1].
std::array<double, 3> reference_hsv(double r, double g, double b) {
  const double v = std::max({r, g, b}), c = v - std::min({r, g, b});
  double h = 0;
  if (c > 0) {
    if (v == r)
      h = 60 * (g - b) / c;
    else if (v == g)
      h = 60 * ((b - r) / c + 2);
    else
      h = 60 * ((r - g) / c + 4);
  }
  if (h < 0) h += 360;
  return {h, v > 0 ? c / v : 0, v};
}

std::array<double, 3> reference_rgb(double h, double s, double v) {
  const double c = v * s, hp = h / 60, x = c * (1 - std::abs(std::fmod(hp, 2.0) - 1)), m = v - c;
  const int sector = int(hp) % 6;
  const std::array<double, 3> table[6] = {{c, x, 0}, {x, c, 0}, {0, c, x}, {0, x, c}, {x, 0, c}, {c, 0, x}};
  const std::array<double, 3>& t = table[sector];
  return {t[0] + m, t[1] + m, t[2] + m};
}

bool near_half(double x, double within) {
  return std::abs(x - std::floor(x) - 0.5) < within;
}

}  // namespace

TEST_CASE("train augment: RandomHSV against a textbook HSV conversion", "[train_loader]") {
  std::mt19937 rng(5);
  Image image(4096, 1);
  for (size_t i = 0; i < image.rgb.size(); ++i) image.rgb[i] = uint8_t(rng() & 255);
  const Colour fixed[] = {{0, 0, 0},   {255, 255, 255}, {128, 128, 128}, {255, 0, 0},
                          {0, 255, 0}, {0, 0, 255},     {255, 255, 0},   {12, 200, 90}};
  for (size_t k = 0; k < std::size(fixed); ++k)
    std::copy(fixed[k].begin(), fixed[k].end(), image.pixel(int(k), 0));
  for (const HsvGains gains : {HsvGains{0.015, 0.7, 0.4}, HsvGains{-0.015, -0.7, -0.4},
                               HsvGains{0.4, 0.2, -0.1}, HsvGains{-0.3, 0, 0}}) {
    Image out = image;
    apply_hsv(out, gains);
    int checked = 0;
    for (int x = 0; x < image.width; ++x) {
      const uint8_t* p = image.pixel(x, 0);
      const std::array<double, 3> hsv = reference_hsv(p[0], p[1], p[2]);
      // OpenCV's 8-bit HSV: H / 2, S * 255, V. Values that close to a rounding tie that OpenCV's fixed point
      // (12 fraction bits: an error up to 5 * diff / 8192 in H, diff / 8192 in S) may round either way are
      // left out.
      const double h_units = hsv[0] / 2, s_units = hsv[1] * 255;
      const double diff = std::max({p[0], p[1], p[2]}) - std::min({p[0], p[1], p[2]});
      if (near_half(h_units, 5 * diff / 8192 + 1e-6) || near_half(s_units, diff / 8192 + 1e-6)) continue;
      const int h8 = int(std::lround(h_units)) % 180, s8 = int(std::lround(s_units)), v8 = int(hsv[2]);
      // Ultralytics' tables: hue rotated by gain * 180 modulo 180; S, V times 1 + gain, clipped; truncated.
      double hue = std::fmod(h8 + gains.h * 180, 180.0);
      if (hue < 0) hue += 180;
      const int h2 = int(hue), s2 = int(std::min(s8 * (1 + gains.s), 255.0)),
                v2 = int(std::min(v8 * (1 + gains.v), 255.0));
      const std::array<double, 3> rgb = reference_rgb(h2 * 2.0, s2 / 255.0, v2 / 255.0);
      const uint8_t* q = out.pixel(x, 0);
      INFO("pixel " << int(p[0]) << " " << int(p[1]) << " " << int(p[2]) << " gains " << gains.h << " "
                    << gains.s << " " << gains.v);
      for (int c = 0; c < 3; ++c) CHECK(std::abs(int(q[c]) - int(std::lround(rgb[size_t(c)] * 255))) <= 1);
      ++checked;
    }
    CHECK(checked > 3200);  // of 4096
  }
}

TEST_CASE("train augment: the 8-bit HSV conversions give OpenCV's values", "[train_loader]") {
  // cv2.cvtColor (opencv-python-headless 4.14.0, the same in 5.0.0) on pixels of a 640-wide image: rounding-
  // and fused-multiply-add-sensitive cases (the first five), edge hues, random ones.
  const std::array<Colour, 2> hsv_to_rgb[] = {
      {{{1, 90, 85}, {85, 56, 55}}},       {{{1, 90, 170}, {170, 112, 110}}},
      {{{1, 102, 75}, {75, 45, 44}}},      {{{1, 150, 153}, {153, 66, 63}}},
      {{{9, 225, 51}, {51, 19, 5}}},       {{{150, 70, 81}, {81, 58, 80}}},
      {{{135, 61, 137}, {120, 104, 137}}}, {{{61, 179, 195}, {58, 195, 62}}},
      {{{0, 0, 77}, {77, 77, 77}}},        {{{179, 255, 255}, {255, 0, 8}}},
      {{{30, 255, 255}, {255, 255, 0}}},   {{{90, 128, 200}, {99, 199, 200}}},
      {{{170, 160, 175}, {175, 65, 101}}}, {{{161, 148, 198}, {198, 83, 155}}},
      {{{150, 57, 14}, {14, 10, 13}}},     {{{54, 72, 223}, {172, 223, 160}}},
      {{{164, 1, 127}, {127, 126, 126}}},  {{{147, 33, 204}, {201, 177, 204}}},
      {{{21, 119, 209}, {209, 179, 111}}}, {{{54, 87, 71}, {51, 71, 46}}}};
  for (const auto& [hsv, rgb] : hsv_to_rgb) {
    INFO("hsv " << int(hsv[0]) << " " << int(hsv[1]) << " " << int(hsv[2]));
    CHECK(hsv8_to_rgb(hsv[0], hsv[1], hsv[2]) == rgb);
  }
  const std::array<Colour, 2> rgb_to_hsv[] = {{{{255, 0, 0}, {0, 255, 255}}},
                                              {{{0, 255, 0}, {60, 255, 255}}},
                                              {{{0, 0, 255}, {120, 255, 255}}},
                                              {{{255, 255, 255}, {0, 0, 255}}},
                                              {{{0, 0, 0}, {0, 0, 0}}},
                                              {{{1, 0, 0}, {0, 255, 1}}},
                                              {{{250, 10, 12}, {0, 245, 250}}},
                                              {{{12, 200, 90}, {72, 240, 200}}},
                                              {{{10, 11, 250}, {120, 245, 250}}},
                                              {{{128, 129, 127}, {45, 4, 129}}},
                                              {{{184, 65, 253}, {139, 189, 253}}},
                                              {{{113, 122, 129}, {103, 32, 129}}},
                                              {{{149, 141, 130}, {17, 33, 149}}},
                                              {{{254, 206, 202}, {2, 52, 254}}},
                                              {{{179, 159, 87}, {23, 131, 179}}},
                                              {{{253, 119, 55}, {10, 200, 253}}},
                                              {{{216, 41, 219}, {149, 207, 219}}},
                                              {{{156, 29, 11}, {4, 237, 156}}}};
  for (const auto& [rgb, hsv] : rgb_to_hsv) {
    INFO("rgb " << int(rgb[0]) << " " << int(rgb[1]) << " " << int(rgb[2]));
    CHECK(rgb_to_hsv8(rgb[0], rgb[1], rgb[2]) == hsv);
  }
}

TEST_CASE("train augment: through the whole recipe (mosaic, affine, flip) every box stays tight",
          "[train_loader]") {
  // Every image the recipe asks for is a new 64 x 48 one with two rectangles of colours never used before
  // (class = the colour's number), so each colour in the output comes from one rectangle. Colours all have
  // blue 250 (a blend with the grey 114 is never another colour) and rectangles keep 6 px apart.
  int drawn = 0;
  std::vector<Colour> colours;
  const SampleSource source = [&](size_t) -> std::optional<LabeledImage> {
    std::vector<Rect> rects;
    for (const Rect& r : {Rect{4, 6, 26, 40, {}}, Rect{32, 10, 58, 30, {}}}) {
      const int k = drawn++;
      colours.push_back({uint8_t(30 + k * 67 % 200), uint8_t(30 + k * 131 % 200), 250});
      rects.push_back({r.x1, r.y1, r.x2, r.y2, colours.back()});
    }
    LabeledImage item = draw_rects(64, 48, rects);
    for (size_t j = 0; j < 2; ++j) item.boxes[j].cls = drawn - 2 + int(j);
    return item;
  };
  AugmentSettings settings;
  settings.hsv_h = settings.hsv_s = settings.hsv_v = 0;  // colours must stay exact
  // The defaults; then rotation, shear and perspective too, where the corners of a rectangle become wedges
  // whose tips hold no pixel of the exact colour (a wider slack), and where a box clipped at the frame is not
  // tight on its other sides either (the corner box of the whole rectangle, clipped, as Ultralytics does):
  // there only that the colour lies inside its box.
  for (const bool skewed : {false, true}) {
    if (skewed) settings.degrees = 10, settings.shear = 5, settings.perspective = 0.0005;
    int boxes = 0, mosaics = 0;
    for (uint64_t seed = 0; seed < 40; ++seed) {
      dataset::SynthRandom random(seed);
      const int before = drawn;
      const std::optional<LabeledImage> out =
          augment_sample(0, 10, source, settings, seed % 4 != 3, 64, random);
      REQUIRE(out);
      mosaics += drawn - before == 8;
      for (const loss::GtBox& b : out->boxes) {
        INFO("seed " << seed << (skewed ? " skewed" : ""));
        const bool clipped = b.x1 == 0 || b.y1 == 0 || b.x2 == 64 || b.y2 == 64;
        check_tight(out->image, colours[size_t(b.cls)], b, !skewed ? 2 : clipped ? 64 : 4);
        ++boxes;
      }
    }
    CHECK(mosaics >= 20);
    CHECK(boxes >= 80);
  }
}
