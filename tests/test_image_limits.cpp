// Degenerate and oversized images (issue 16 items 2 and 6): an image of 0 pixels, or one declaring more than
// the one size limit of every decoder (JPEG, PNG, BMP), is refused from its header with one line naming the
// file, before its pixels are allocated; in a folder it is skipped and every good image is still processed.
#include <catch2/catch.hpp>

#include <chrono>

#include <nlohmann/json.hpp>

#include "tests/checkpoint_test_support.hpp"
#include "tests/fuzz_support.hpp"
#include "tests/image_bytes_support.hpp"
#include "nvrtc_runtime/errors.hpp"
#include "pipeline/image/image.hpp"
#include "tests/test_helpers.hpp"

namespace fs = std::filesystem;

namespace {

std::vector<uint8_t> as_bytes(const std::string& s) {
  return std::vector<uint8_t>(s.begin(), s.end());
}

std::string decode_error(const std::string& bytes, const std::string& name) {
  try {
    lab::decode_image_bytes(as_bytes(bytes), name);
  } catch (const lab::UsageError& e) {
    return e.what();
  }
  return "(decoded)";
}

// The PNG with its IHDR width and height replaced (stb_image does not check chunk CRCs).
std::string png_declaring(std::string png, uint32_t width, uint32_t height) {
  for (int i = 0; i < 4; ++i) {
    png[16 + i] = char(width >> (24 - 8 * i));
    png[20 + i] = char(height >> (24 - 8 * i));
  }
  return png;
}

}  // namespace

TEST_CASE("an image of 0 pixels is refused naming the file", "[image][limits]") {
  CHECK(decode_error(lab::test::bmp_bytes(0, 0, 0), "zero.bmp") ==
        "zero.bmp: cannot read image (0x0 pixels: an empty image)");
  CHECK(decode_error(lab::test::bmp_bytes(16, 0, 64), "flat.bmp") ==
        "flat.bmp: cannot read image (16x0 pixels: an empty image)");
  CHECK(lab::decode_image_bytes(as_bytes(lab::test::small_image_bytes("bmp")), "ok.bmp").width == 48);
}

TEST_CASE("JPEG, PNG and BMP share one size limit, checked before decoding", "[image][limits]") {
  const double rss_before = lab::test::fuzz::peak_rss_mib();
  const auto start = std::chrono::steady_clock::now();
  const std::string too_large =
      "20000x20000 pixels: larger than the limit of 32768 per side and 134217728 in all";
  // A 20000x20000 JPEG would take 1.2 GB to decode: refused from its frame header.
  CHECK(decode_error(lab::test::jpeg_declaring(lab::test::small_image_bytes("jpg"), 20000, 20000),
                     "big.jpg") == "big.jpg: cannot read image (" + too_large + ")");
  // (stb_image refuses PNGs of more than 2^30 bytes itself, so this one stays under that and over ours.)
  CHECK(decode_error(png_declaring(lab::test::small_image_bytes("png"), 12000, 12000), "big.png") ==
        "big.png: cannot read image (12000x12000 pixels: larger than the limit of 32768 per side and "
        "134217728 in "
        "all)");
  CHECK(decode_error(lab::test::bmp_bytes(20000, 20000, 64), "big.bmp") ==
        "big.bmp: cannot read image (" + too_large + ")");
  CHECK(
      decode_error(lab::test::bmp_bytes(40000, 2, 64), "wide.bmp") ==
      "wide.bmp: cannot read image (40000x2 pixels: larger than the limit of 32768 per side and 134217728 in "
      "all)");
  CHECK(std::chrono::steady_clock::now() - start < std::chrono::seconds(2));
  CHECK(lab::test::fuzz::peak_rss_mib() - rss_before < 100);
  CHECK(lab::image_size_problem(32768, 4096).empty());  // exactly at both limits
  CHECK_FALSE(lab::image_size_problem(32768, 4097).empty());
}

TEST_CASE("lab detect skips a 0x0 BMP and an oversized JPEG in a folder and processes the rest",
          "[image][limits][detect][printable]") {
  if (!fs::exists(fs::path(LAB_ASSETS_DIR) / "models" / "yolo26n.pt")) {
    WARN("skipped: shared assets not found at " LAB_ASSETS_DIR);
    return;
  }
  lab::test::ScratchDir dir("detect-degenerate");
  const fs::path images = dir.path / "images";
  fs::create_directories(images);
  lab::Image wide(640, 64, 200);  // a small forward: rect letterbox 640x64
  lab::write_image(wide, images / "b_good.png");
  // A good image whose name would forge a line and clear the screen if printed raw (issue 16 item 8).
  lab::write_image(wide, images / "d_evil\nlab: 0 of 4 images could not be read\x1b[2J.png");
  lab::test::write_binary(images / "a_zero.bmp", lab::test::bmp_bytes(0, 0, 0));
  lab::test::write_binary(images / "c_huge.jpg",
                          lab::test::jpeg_declaring(lab::test::small_image_bytes("jpg"), 20000, 20000));
  const fs::path json = dir.path / "out.json";
  const lab::test::LabResult r = lab::test::run_lab(
      "detect " + lab::test::quoted(images.string()) + " --backend reference --out " +
      lab::test::quoted((dir.path / "runs").string()) + " --json " + lab::test::quoted(json.string()));
  INFO(r.out << r.err);
  CHECK(r.exit_code == 1);  // some images were skipped
  CHECK(lab::test::contains(r.err, "a_zero.bmp: cannot read image (0x0 pixels: an empty image) (skipped)"));
  CHECK(
      lab::test::contains(r.err, "c_huge.jpg: cannot read image (20000x20000 pixels: larger than the limit"));
  CHECK(lab::test::contains(r.err, "2 of 4 images could not be read"));
  CHECK(lab::test::contains(r.out, "b_good.png: 64x640 "));
  CHECK(lab::test::contains(r.out, "\nd_evil\\nlab: 0 of 4 images could not be read\\x1b[2J.png: 64x640 "));
  CHECK_FALSE(lab::test::contains(r.out + r.err, "\x1b"));
  CHECK_FALSE(lab::test::contains(r.out + r.err, "\nlab: 0 of 4"));
  const nlohmann::json out = nlohmann::json::parse(lab::test::read_text(json));
  REQUIRE(out["images"].size() == 2);
  CHECK(fs::exists(dir.path / "runs" / "b_good.png"));
}
