// Images: decode errors, atomic writes, the letterbox geometry (hand-computed from spec/yolo26.md's
// formulas), the OpenCV-exact bilinear resize on hand-computed cases, the letterboxed bus.jpg against the
// Ultralytics golden input, the inverse box mapping, and box drawing.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <fstream>

#include "nvrtc_runtime/errors.hpp"
#include "pipeline/image/draw.hpp"
#include "pipeline/image/image.hpp"
#include "pipeline/image/jpeg_codec.hpp"
#include "pipeline/image/letterbox.hpp"
#include "pipeline/safetensors.hpp"
#include "tests/test_helpers.hpp"

namespace fs = std::filesystem;
using namespace lab;

namespace {

const fs::path kAssets = LAB_ASSETS_DIR;

void check_geometry(int w, int h, int imgsz, bool rect, int rw, int rh, int out_w, int out_h, int left,
                    int top) {
  INFO(w << "x" << h << " imgsz " << imgsz << (rect ? " rect" : " square"));
  const LetterboxGeometry g = letterbox_geometry(w, h, imgsz, rect);
  CHECK(g.resized_width == rw);
  CHECK(g.resized_height == rh);
  CHECK(g.width == out_w);
  CHECK(g.height == out_h);
  CHECK(g.left == left);
  CHECK(g.top == top);
}

bool has_colour(const Image& image, int x, int y, const Rgb& c) {
  const uint8_t* p = image.pixel(x, y);
  return p[0] == c[0] && p[1] == c[1] && p[2] == c[2];
}

}  // namespace

TEST_CASE("letterbox geometry follows the Ultralytics formulas", "[image]") {
  // bus.jpg 810x1080: r = 640/1080, new 480x640; rect pads 160 % 32 = 0; square pads 80 + 80.
  check_geometry(810, 1080, 640, true, 480, 640, 480, 640, 0, 0);
  check_geometry(810, 1080, 640, false, 480, 640, 640, 640, 80, 0);
  CHECK(letterbox_geometry(810, 1080, 640, true).ratio == Approx(640.0 / 1080));
  // zidane.jpg 1280x720: r = 0.5, new 640x360; rect: 280 % 32 = 24 -> 12 + 12; square: 140 + 140.
  check_geometry(1280, 720, 640, true, 640, 360, 640, 384, 0, 12);
  check_geometry(1280, 720, 640, false, 640, 360, 640, 640, 0, 140);
  // 333x500 at 320: r = 0.64, new round(213.12) = 213 x 320; rect: 107 % 32 = 11 -> round(5.4) = 5 left,
  // round(5.6) = 6 right; square: 107 -> round(53.4) = 53 left, round(53.6) = 54 right.
  check_geometry(333, 500, 320, true, 213, 320, 224, 320, 5, 0);
  check_geometry(333, 500, 320, false, 213, 320, 320, 320, 53, 0);
  // 101x1280 at 640: w * r = 50.5 rounds half to even (Python's round) -> 50; rect 590 % 32 = 14 -> 7 + 7.
  check_geometry(101, 1280, 640, true, 50, 640, 64, 640, 7, 0);
  // Upscaling a small image: 100x50 at 640: r = 6.4, new 640x320, rect needs no padding.
  check_geometry(100, 50, 640, true, 640, 320, 640, 320, 0, 0);
  check_geometry(100, 50, 640, false, 640, 320, 640, 640, 0, 160);
  CHECK_THROWS_AS(letterbox_geometry(0, 10, 640, true), UsageError);
}

TEST_CASE("bilinear resize reproduces OpenCV INTER_LINEAR on hand-computed cases", "[image]") {
  // Row [0, 255] to width 4: fx = -0.25 (clamped), 0.25, 0.75, 1.25 (clamped) -> 0, 63.75, 191.25, 255 with
  // 11-bit weights and OpenCV's rounding shifts -> 0, 64, 191, 255.
  Image row(2, 1);
  for (int c = 0; c < 3; ++c) row.pixel(1, 0)[c] = 255;
  const Image wide = resize_bilinear(row, 4, 1);
  const int expected[4] = {0, 64, 191, 255};
  for (int x = 0; x < 4; ++x)
    for (int c = 0; c < 3; ++c) CHECK(int(wide.pixel(x, 0)[c]) == expected[x]);
  // The same along y, where OpenCV clamps the row indices instead of the position.
  Image column(1, 2);
  for (int c = 0; c < 3; ++c) column.pixel(0, 1)[c] = 255;
  const Image tall = resize_bilinear(column, 1, 4);
  for (int y = 0; y < 4; ++y) CHECK(int(tall.pixel(0, y)[0]) == expected[y]);
  // Same size: unchanged.
  const Image same = resize_bilinear(wide, 4, 1);
  CHECK(same.rgb == wide.rgb);
}

TEST_CASE("letterboxed bus.jpg reproduces the Ultralytics golden input byte for byte", "[image]") {
  const fs::path golden = kAssets / "goldens" / "bus640_golden_0.safetensors";
  if (!fs::exists(golden)) {
    WARN("skipped: shared assets not found at " << kAssets);
    return;
  }
  const Image bus = decode_image(kAssets / "images" / "bus.jpg");
  REQUIRE(bus.width == 810);
  REQUIRE(bus.height == 1080);
  const LetterboxGeometry g = letterbox_geometry(bus.width, bus.height, 640, false);
  std::vector<float> ours;
  append_nchw(letterbox(bus, g), ours);
  const std::vector<float> gold = SafetensorsFile::load(golden).floats("input", {1, 3, 640, 640});
  REQUIRE(ours.size() == gold.size());

  // libjpeg-turbo decoding (as OpenCV's), OpenCV's INTER_LINEAR resize, the 114 padding and /255: every value
  // is the same byte (a difference of one level is 1/255 = 0.0039).
  double max_diff = 0;
  size_t different = 0;
  for (size_t i = 0; i < ours.size(); ++i) {
    const double diff = std::fabs(double(ours[i]) - double(gold[i])) * 255.0;
    max_diff = std::max(max_diff, diff);
    different += diff > 1e-3;
  }
  INFO("max " << max_diff << "/255, " << different << " of " << ours.size() << " values differ");
  CHECK(different == 0);
  // The one-pass letterbox into a staging buffer, as lab detect's host workers run it.
  std::vector<float> direct(gold.size());
  letterbox_into_nchw(bus, g, direct.data());
  CHECK(direct == ours);
}

TEST_CASE("the one-pass letterbox writes what letterbox then append_nchw do, padding included", "[image]") {
  // Random pixels; down- and upscaling, rect and square, odd sizes and a single pixel.
  uint32_t state = 12345;
  for (const auto& [w, h] : {std::pair{810, 1080}, {1280, 720}, {33, 17}, {1, 1}, {3, 200}, {640, 640}})
    for (const int imgsz : {64, 320, 640})
      for (const bool rect : {true, false}) {
        INFO(w << "x" << h << " imgsz " << imgsz << (rect ? " rect" : " square"));
        Image image(w, h);
        for (uint8_t& v : image.rgb) v = uint8_t((state = state * 1664525u + 1013904223u) >> 24);
        const LetterboxGeometry g = letterbox_geometry(w, h, imgsz, rect);
        std::vector<float> expected;
        append_nchw(letterbox(image, g), expected);
        std::vector<float> direct(expected.size(), -1.0f);
        letterbox_into_nchw(image, g, direct.data());
        CHECK(direct == expected);
      }
}

TEST_CASE("image_file_size reads the size from the header of a JPEG or PNG, and nothing from a bad file",
          "[image]") {
  test::ScratchDir dir("image-size");
  write_image(Image(37, 21, 50), dir.path / "a.jpg");
  write_image(Image(5, 9, 50), dir.path / "b.png");
  test::write_file(dir.path / "c.jpg", "not a jpeg");
  Image noise(1200, 900);
  uint32_t state = 7;
  for (uint8_t& v : noise.rgb) v = uint8_t((state = state * 1664525u + 1013904223u) >> 24);
  write_image(noise, dir.path / "large.jpg");  // megabytes: only the start is read
  REQUIRE(fs::file_size(dir.path / "large.jpg") > 1024 * 1024);
  const std::optional<ImageSize> large = image_file_size(dir.path / "large.jpg");
  REQUIRE(large);
  CHECK(large->width == 1200);
  CHECK(large->height == 900);
  const std::optional<ImageSize> jpeg = image_file_size(dir.path / "a.jpg");
  REQUIRE(jpeg);
  CHECK(jpeg->width == 37);
  CHECK(jpeg->height == 21);
  const std::optional<ImageSize> png = image_file_size(dir.path / "b.png");
  REQUIRE(png);
  CHECK(png->width == 5);
  CHECK(png->height == 9);
  CHECK_FALSE(image_file_size(dir.path / "c.jpg"));
  CHECK_FALSE(image_file_size(dir.path / "absent.png"));
}

TEST_CASE("boxes map back to the source image and are clipped", "[image]") {
  const LetterboxGeometry square = letterbox_geometry(810, 1080, 640, false);  // left 80, r = 0.5926
  const double r = 640.0 / 1080;
  Box b = scale_box_to_source({80, 0, 560, 640}, square);
  CHECK(b.x1 == Approx(0).margin(1e-3));
  CHECK(b.y1 == Approx(0).margin(1e-3));
  CHECK(b.x2 == Approx(810).margin(1e-3));
  CHECK(b.y2 == Approx(1080).margin(1e-3));
  b = scale_box_to_source({100, 50, 400, 300}, square);
  CHECK(b.x1 == Approx(20 / r));
  CHECK(b.y1 == Approx(50 / r));
  CHECK(b.x2 == Approx(320 / r));
  CHECK(b.y2 == Approx(300 / r));
  b = scale_box_to_source({10, -20, 700, 700}, square);  // outside on every side: clipped
  CHECK(b.x1 == 0);
  CHECK(b.y1 == 0);
  CHECK(b.x2 == 810);
  CHECK(b.y2 == 1080);
  // Rect zidane: top padding 12, r = 0.5.
  const LetterboxGeometry rect = letterbox_geometry(1280, 720, 640, true);
  b = scale_box_to_source({100, 112, 200, 212}, rect);
  CHECK(b.x1 == Approx(200));
  CHECK(b.y1 == Approx(200));
  CHECK(b.x2 == Approx(400));
  CHECK(b.y2 == Approx(400));
}

TEST_CASE("unreadable images are usage errors naming the file", "[image]") {
  test::ScratchDir dir("image-bad");
  const fs::path text = dir.path / "notes.jpg";
  test::write_file(text, "this is not an image");
  const fs::path empty = dir.path / "empty.png";
  test::write_file(empty, "");
  for (const fs::path& p : {text, empty, dir.path / "absent.jpg", dir.path}) {
    try {
      decode_image(p);
      FAIL("no error for " << p);
    } catch (const UsageError& e) {
      CHECK(std::string(e.what()).find(p.string()) != std::string::npos);
    }
  }
}

TEST_CASE("images are written atomically as PNG or JPEG by extension", "[image]") {
  test::ScratchDir dir("image-write");
  Image image(40, 30);
  for (int y = 0; y < 30; ++y)
    for (int x = 0; x < 40; ++x) image.pixel(x, y)[0] = uint8_t(x * 6), image.pixel(x, y)[1] = uint8_t(y * 8);
  write_image(image, dir.path / "a.png");
  const Image png = decode_image(dir.path / "a.png");
  CHECK(png.rgb == image.rgb);
  write_image(image, dir.path / "b.jpg");
  const Image jpg = decode_image(dir.path / "b.jpg");
  CHECK(jpg.width == 40);
  CHECK(jpg.height == 30);
  CHECK_THROWS_AS(write_image(image, dir.path / "c.gif"), UsageError);
  CHECK_THROWS_AS(write_image(image, dir.path / "no_such_dir" / "d.png"), UsageError);
  size_t files = 0;
  for ([[maybe_unused]] const auto& e : fs::directory_iterator(dir.path)) ++files;
  CHECK(files == 2);  // a.png and b.jpg, no temporary left behind
}

TEST_CASE("drawing puts the class colour on the box edges and leaves the inside alone", "[image]") {
  Image image(200, 200, 90);
  draw_annotations(image, {{50, 60, 150, 160, 3, ""}, {20, 100, 40, 120, 5, "bus 0.91"}});
  const Rgb c3 = class_colour(3), c5 = class_colour(5);
  CHECK(class_colour(3) != class_colour(4));
  CHECK(line_width_for(image) == 2);
  CHECK(has_colour(image, 50, 110, c3));   // left edge
  CHECK(has_colour(image, 51, 110, c3));   // 2 px wide
  CHECK(has_colour(image, 149, 110, c3));  // right edge
  CHECK(has_colour(image, 100, 60, c3));   // top edge
  CHECK(has_colour(image, 100, 159, c3));  // bottom edge
  CHECK(image.pixel(100, 110)[0] == 90);   // inside untouched
  CHECK(image.pixel(52, 110)[0] == 90);
  CHECK(image.pixel(48, 110)[0] == 90);  // outside untouched
  // The label sits above its box: its background has the class colour, and the text adds white pixels.
  CHECK(has_colour(image, 21, 98, c5));
  size_t white = 0;
  for (int y = 80; y < 100; ++y)
    for (int x = 20; x < 120; ++x) white += has_colour(image, x, y, {255, 255, 255});
  CHECK(white > 20);
  // A box crossing the border is clipped, not a crash.
  draw_annotations(image, {{-10, -10, 500, 500, 1, "person 0.50"}});
  CHECK(has_colour(image, 0, 100, class_colour(1)));
}

TEST_CASE("JPEG through libjpeg-turbo: encode then decode stays close, a truncated file names itself",
          "[image]") {
  Image img(64, 48);
  for (int y = 0; y < 48; ++y)
    for (int x = 0; x < 64; ++x) {
      uint8_t* p = img.pixel(x, y);
      p[0] = uint8_t(x * 4), p[1] = uint8_t(y * 5), p[2] = uint8_t(128 + (x - y));
    }
  const std::vector<uint8_t> bytes = encode_jpeg(img, 95, "gradient.jpg");
  REQUIRE(looks_like_jpeg(bytes));
  const Image back = decode_image_bytes(bytes, "gradient.jpg");
  REQUIRE(back.width == 64);
  REQUIRE(back.height == 48);
  double sum = 0;
  int worst = 0;
  for (size_t i = 0; i < img.rgb.size(); ++i) {
    const int d = std::abs(int(back.rgb[i]) - int(img.rgb[i]));
    sum += d;
    worst = std::max(worst, d);
  }
  // Quality 95 on a smooth gradient: a few levels at most (4:2:0 chroma on the diagonal blue ramp).
  CHECK(sum / double(img.rgb.size()) < 2.0);
  CHECK(worst <= 12);
  const std::vector<uint8_t> half(bytes.begin(), bytes.begin() + long(bytes.size() / 2));
  CHECK_THROWS_WITH(decode_image_bytes(half, "half.jpg"), Catch::Contains("half.jpg: cannot read image ("));
}
