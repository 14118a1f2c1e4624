// The device letterbox (letterbox_resize through LetterboxResizeOp, from a staged letterbox block) against
// the host letterbox (letterbox_into_nchw), the reference: the same floats, bit for bit, on the sample images
// and on random images downscaled, upscaled, unscaled, square and rect; a kernel network's forward over a
// batch mixing a staged and a letterboxed image gives the detections of the host-letterboxed batch; and
// prepare_image stages only what fits a slot.
#include <catch2/catch.hpp>

#include <algorithm>

#include "kernels/compare.hpp"
#include "kernels/preprocess/letterbox_resize_op.hpp"
#include "nvrtc_runtime/backend.hpp"
#include "pipeline/detect/detector.hpp"
#include "pipeline/image/image.hpp"
#include "pipeline/image/staged_letterbox.hpp"
#include "pipeline/network.hpp"
#include "tests/network_test_support.hpp"
#include "tests/test_helpers.hpp"

using namespace lab;

namespace {

Image random_image(int width, int height, uint64_t seed) {
  Image image(width, height);
  const std::vector<float> noise = random_uniform(image.rgb.size(), 0.0f, 255.99f, seed);
  std::ranges::transform(noise, image.rgb.begin(), [](float v) { return uint8_t(v); });
  return image;
}

// A staged letterbox of `image` in 16-byte aligned host memory.
struct Staged {
  std::vector<float> memory;  // floats: 16-byte aligned by the allocator
  const StagedLetterbox* block = nullptr;
  Staged(const Image& image, const LetterboxGeometry& g)
      : memory(staged_letterbox_layout(g).bytes / sizeof(float) + 1),
        block(stage_letterbox(image, g, memory.data())) {}
};

// The device letterbox of `image` equals the host's, every float.
void check_against_host(Backend& backend, const LetterboxResizeOp& op, const Image& image, int imgsz, bool rect) {
  const LetterboxGeometry g = letterbox_geometry(image.width, image.height, imgsz, rect);
  INFO(image.width << "x" << image.height << " -> " << g.resized_width << "x" << g.resized_height << " in "
                   << g.width << "x" << g.height);
  std::vector<float> expected(size_t(3) * g.width * g.height);
  letterbox_into_nchw(image, g, expected.data());
  const Staged staged(image, g);
  DeviceBuffer block = backend.alloc(staged.block->bytes);
  backend.upload(block.get(), staged.block, staged.block->bytes);
  DeviceBuffer out = backend.alloc(expected.size() * sizeof(float));
  op.launch(letterbox_resize_params(*staged.block, block.as<const unsigned char>(), out.as<float>()));
  backend.synchronize();
  const std::vector<float> got = backend.download_vector<float>(out, expected.size());
  size_t differing = 0;
  for (size_t i = 0; i < got.size(); ++i) differing += got[i] != expected[i] ? 1 : 0;
  CHECK(differing == 0);
}

void check_device_letterbox(const std::string& backend_name) {
  auto backend = make_backend(backend_name, test::embedded_context());
  const LetterboxResizeOp op(*backend);
  for (const char* name : {"zidane.jpg", "bus.jpg"}) {
    const std::filesystem::path path = test::assets_dir() / "images" / name;
    if (!std::filesystem::exists(path)) {
      WARN("skipped: " << path.string() << " is absent");
      continue;
    }
    const Image image = decode_image(path);
    check_against_host(*backend, op, image, 640, true);
    check_against_host(*backend, op, image, 640, false);
  }
  check_against_host(*backend, op, random_image(37, 50, 1), 96, true);     // upscaled
  check_against_host(*backend, op, random_image(640, 384, 2), 640, true);  // unscaled, unpadded
  check_against_host(*backend, op, random_image(640, 427, 3), 640, true);  // unscaled, padded 10 / 11
  check_against_host(*backend, op, random_image(301, 97, 4), 160, false);  // odd ratio, square
  check_against_host(*backend, op, random_image(1, 1, 5), 32, true);       // a single pixel
}

// A batch of two 96x64 letterboxes, one staged and one letterboxed on the host, gives the detections of
// the same batch letterboxed on the host.
void check_mixed_batch(const std::string& backend_name) {
  LAB_SHARED_YOLO26N_OR_RETURN(model);
  auto backend = make_backend(backend_name, test::embedded_context());
  const std::unique_ptr<Network> network = make_kernel_network(*model, *backend);
  REQUIRE(network->letterboxes_on_device());
  const Image first = random_image(150, 97, 6), second = random_image(120, 80, 7);
  const LetterboxGeometry g1 = letterbox_geometry(first.width, first.height, 96, true);
  const LetterboxGeometry g2 = letterbox_geometry(second.width, second.height, 96, true);
  REQUIRE((g1.width == 96 && g1.height == 64 && g2.width == 96 && g2.height == 64));
  const size_t per_image = size_t(3) * 64 * 96;
  std::vector<float> batch(2 * per_image);
  letterbox_into_nchw(first, g1, batch.data());
  letterbox_into_nchw(second, g2, batch.data() + per_image);
  network->forward(batch.data(), 2, 64, 96);
  const std::vector<float> expected = network->detections();
  const Staged staged(first, g1);
  network->forward_images({staged.block, batch.data() + per_image}, 64, 96);
  CHECK(network->detections() == expected);
  CHECK(network->tensor("input").values == batch);
}

}  // namespace

TEST_CASE("the device letterbox of a staged image equals the host letterbox bit for bit", "[image]") {
  check_device_letterbox("cpu");
}

TEST_CASE("on the GPU the device letterbox of a staged image equals the host letterbox bit for bit",
          "[image][gpu]") {
  LAB_REQUIRE_GPU_OR_SKIP();
  check_device_letterbox("cuda");
}

TEST_CASE("a forward over a staged and a letterboxed image equals the forward of the host-letterboxed batch",
          "[network]") {
  check_mixed_batch("cpu");
}

TEST_CASE("on the GPU a forward over a staged and a letterboxed image equals the host-letterboxed batch's",
          "[network][gpu]") {
  LAB_REQUIRE_GPU_OR_SKIP();
  check_mixed_batch("cuda");
}

TEST_CASE("prepare_image stages an image whose block fits the slot and letterboxes a larger one on the host",
          "[detect]") {
  DetectorOptions options;
  options.imgsz = 320;
  std::vector<float> slot(max_input_floats(options));  // 3 x 320 x 320 floats = 1228800 bytes
  const Image fits = random_image(640, 480, 8), larger = random_image(640, 640, 9);
  const LetterboxGeometry g = letterbox_geometry(larger.width, larger.height, 320, true);
  REQUIRE(staged_letterbox_layout(g).bytes > slot.size() * sizeof(float));  // 1228800 bytes of pixels alone

  const PreparedImage staged = prepare_image(fits, "fits.png", options, slot.data(), true);
  REQUIRE(staged.input.staged);
  CHECK(static_cast<const void*>(staged.input.staged) == slot.data());
  CHECK(staged.input.nchw == nullptr);
  CHECK(staged.input.staged->geometry.resized_width == 320);
  CHECK(staged.input.staged->geometry.resized_height == 240);

  for (const bool stage : {true, false}) {
    const Image& image = stage ? larger : fits;
    const PreparedImage p = prepare_image(image, "host.png", options, slot.data(), stage);
    CHECK(p.input.staged == nullptr);
    REQUIRE(p.input.nchw == slot.data());
    std::vector<float> expected(size_t(3) * p.geometry.width * p.geometry.height);
    letterbox_into_nchw(image, p.geometry, expected.data());
    CHECK(std::equal(expected.begin(), expected.end(), p.input.nchw));
  }
}
