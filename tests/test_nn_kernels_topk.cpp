// The end-to-end top-k post-process on a hand-built input whose ties only the index rule resolves: the
// reference and the kernel (cpu backend, and cuda in the [gpu] twin) must both give the hand-derived rows.
#include <catch2/catch.hpp>

#include <cmath>
#include <iterator>

#include "kernels/detect/topk_postprocess.hpp"
#include "tests/test_helpers.hpp"

using namespace lab;

namespace {

constexpr int kAnchors = 6, kClasses = 2, kMaxDet = 3;

// logits [nc = 2, A = 6]. Best class per anchor: a5 = 3, every other anchor 2. Stage 1 keeps a5, then the
// lowest indices among the ties: a0, a1 (not a2, a3, a4). Stage 2 over ranks (a5, a0, a1) x classes: flat
// scores [0.5, 3 | 1, 2 | 2, 0]: j = 1 (a5, class 1), then the tie at 2 goes to j = 3 (a0, class 1) before
// j = 4 (a1, class 0).
const std::vector<float> kLogits = {1.0f, 2.0f, 2.0f, -1.0f, 2.0f,  0.5f,   // class 0
                                    2.0f, 0.0f, 1.5f, 2.0f,  -3.0f, 3.0f};  // class 1

std::vector<float> boxes() {  // [1, 4, A]: cx = 10a + 5, cy = 100 + a, w = 2 + a, h = 4 + 2a
  std::vector<float> b(4 * kAnchors);
  for (int a = 0; a < kAnchors; ++a) {
    b[a] = 10.0f * a + 5;
    b[kAnchors + a] = 100.0f + a;
    b[2 * kAnchors + a] = 2.0f + a;
    b[3 * kAnchors + a] = 4.0f + 2 * a;
  }
  return b;
}

std::vector<double> expected_row(int anchor, int cls, double logit) {
  const double cx = 10.0 * anchor + 5, cy = 100.0 + anchor, w = 2.0 + anchor, h = 4.0 + 2 * anchor;
  return {cx - w / 2, cy - h / 2, cx + w / 2, cy + h / 2, 1 / (1 + std::exp(-logit)), double(cls)};
}

void check_rows(const std::vector<float>& out) {
  const std::vector<std::vector<double>> rows = {expected_row(5, 1, 3.0), expected_row(0, 1, 2.0),
                                                 expected_row(1, 0, 2.0)};
  REQUIRE(out.size() == 18);
  for (int r = 0; r < 3; ++r)
    for (int i = 0; i < 6; ++i) {
      INFO("row " << r << " column " << i);
      CHECK(out[r * 6 + i] == Approx(rows[r][i]).epsilon(1e-6));
    }
}

void run_on(const std::string& backend_name) {
  auto backend = make_backend(backend_name, test::embedded_context());
  TopkPostprocessOp op(*backend, kAnchors, kClasses, kMaxDet);
  REQUIRE(op.k() == 3);
  DeviceBuffer b = backend->upload_vector(boxes()), l = backend->upload_vector(kLogits);
  DeviceBuffer out = backend->alloc_array<float>(18);
  backend->fill_bytes(out.get(), 0xff, out.bytes());
  op.run(1, b.as<const float>(), l.as<const float>(), out.as<float>());
  backend->synchronize();
  check_rows(backend->download_vector<float>(out, 18));
}

}  // namespace

TEST_CASE("top-k ranking keys follow the float order", "[nn]") {
  const float values[] = {-INFINITY, -3.5f, -1e-30f, -0.0f, 0.0f, 1e-30f, 0.25f, 7.0f, INFINITY};
  for (size_t i = 1; i < std::size(values); ++i)
    CHECK(topk_ranking_key(values[i - 1]) < topk_ranking_key(values[i]));
}

TEST_CASE("top-k reference breaks ties by the lower anchor, then the lower flat index", "[nn]") {
  const std::vector<double> ref =
      topk_postprocess_reference(boxes(), kLogits, 1, kAnchors, kClasses, kMaxDet);
  check_rows({ref.begin(), ref.end()});
}

TEST_CASE("top-k kernel breaks ties like the reference on the cpu backend", "[nn]") {
  run_on("cpu");
}

TEST_CASE("top-k kernel breaks ties like the reference on the cuda backend", "[nn][gpu]") {
  LAB_REQUIRE_GPU_OR_SKIP();
  run_on("cuda");
}
