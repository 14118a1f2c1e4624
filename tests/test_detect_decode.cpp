// detect-decode: the anchor grid, the reference against hand-computed boxes, and the kernel on both backends.
#include <catch2/catch.hpp>

#include "kernels/detect/anchor_grid.hpp"
#include "kernels/detect/detect_decode.hpp"
#include "kernels/runner.hpp"
#include "tests/test_helpers.hpp"

using namespace lab;

TEST_CASE("anchor grid sizes and centres follow the Detect head", "[detect]") {
  CHECK(make_anchor_grid(640, 640).size() == 8400);
  CHECK(make_anchor_grid(480, 640).size() == 80 * 60 + 40 * 30 + 20 * 15);
  AnchorGrid g = make_anchor_grid(32, 32);
  REQUIRE(g.size() == 16 + 4 + 1);
  CHECK(g.x[5] == 1.5f);  // stride 8, row 1, column 1
  CHECK(g.y[5] == 1.5f);
  CHECK(g.stride[5] == 8.0f);
  CHECK(g.x[17] == 1.5f);  // stride 16, row 0, column 1
  CHECK(g.y[17] == 0.5f);
  CHECK(g.stride[20] == 32.0f);
  CHECK_THROWS_AS(make_anchor_grid(100, 640), UsageError);
  // Sizes read h x w everywhere, as lab detect's summary line prints them.
  CHECK_THROWS_WITH(make_anchor_grid(100, 640),
                    "image size 100x640 (h x w) is not a positive multiple of stride 8");
}

TEST_CASE("detect-decode reference reproduces hand-computed boxes", "[detect]") {
  AnchorGrid g = make_anchor_grid(32, 32);
  const size_t A = g.size();
  std::vector<float> raw(4 * A, 1.0f);
  // Anchor 5 (centre 1.5, 1.5, stride 8) with l=1, t=2, r=3, b=4:
  // x1 = (1.5-1)*8 = 4, x2 = (1.5+3)*8 = 36, y1 = (1.5-2)*8 = -4, y2 = (1.5+4)*8 = 44.
  raw[5] = 1, raw[A + 5] = 2, raw[2 * A + 5] = 3, raw[3 * A + 5] = 4;
  // Anchor 20 (centre 0.5, 0.5, stride 32), all distances 0.5: the box is the whole 32x32 image.
  raw[20] = raw[A + 20] = raw[2 * A + 20] = raw[3 * A + 20] = 0.5f;
  auto out = detect_decode_reference(raw, g, 1);
  CHECK(out[5] == 20.0);
  CHECK(out[A + 5] == 20.0);
  CHECK(out[2 * A + 5] == 32.0);
  CHECK(out[3 * A + 5] == 48.0);
  CHECK(out[20] == 16.0);
  CHECK(out[A + 20] == 16.0);
  CHECK(out[2 * A + 20] == 32.0);
  CHECK(out[3 * A + 20] == 32.0);
}

namespace {

void run_detect_decode(const std::string& backend_name, Params given) {
  auto backend = make_backend(backend_name, test::embedded_context());
  const Runner& r = Registry::instance().get("detect_decode");
  Params p = resolve_params(r, given);
  auto inst = r.instantiate(*backend, resolve_variant(r, ""), p, 7);
  inst->launch();
  for (auto& c : inst->check(std::nullopt)) {
    INFO(backend_name << " " << c.output << " rel_l2=" << c.metrics.rel_l2
                      << " max_abs=" << c.metrics.max_abs);
    CHECK(c.metrics.non_finite == 0);
    CHECK(c.pass);
  }
  // A second launch after re-poisoning must write every element again.
  inst->poison();
  inst->launch();
  for (auto& c : inst->check(std::nullopt)) CHECK(c.pass);
}

}  // namespace

TEST_CASE("detect-decode kernel matches the reference on the cpu backend", "[detect]") {
  run_detect_decode("cpu", {{"B", "2"}, {"IMG_H", "96"}, {"IMG_W", "160"}, {"BLOCK", "64"}});
}

TEST_CASE("detect-decode kernel matches the reference on the cuda backend", "[detect][gpu]") {
  LAB_REQUIRE_GPU_OR_SKIP();
  run_detect_decode("cuda", {{"B", "32"}});
  run_detect_decode("cuda", {{"B", "3"}, {"IMG_H", "480"}, {"IMG_W", "640"}, {"BLOCK", "128"}});
}

TEST_CASE("detect-decode parameters are validated with the rule", "[detect]") {
  const Runner& r = Registry::instance().get("detect_decode");
  CHECK_THROWS_WITH(resolve_params(r, {{"IMG_W", "650"}}), Catch::Contains("multiple of 32"));
  CHECK_THROWS_WITH(resolve_params(r, {{"BLOCK", "100"}}), Catch::Contains("power of two"));
  CHECK_THROWS_WITH(resolve_params(r, {{"NOPE", "1"}}), Catch::Contains("valid: B, IMG_H, IMG_W, BLOCK"));
}
