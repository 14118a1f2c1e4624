// nn backward kernels of the weightless layers: every runner (maxpool2d_backward,
// upsample_nearest2x_backward, add_planes) on the cpu backend at a few shapes, overwriting and accumulating
// (and on cuda in the [gpu] twin), every variant that runs a case; the max-pool tie and NaN rules on
// hand-worked planes (both variants); the float64 references against central finite differences of the
// forward references; parameter rules; the sm_90 resource use of the module.
#include <catch2/catch.hpp>

#include <cmath>
#include <numeric>

#include "kernels/nn/plane_backward_ops.hpp"
#include "kernels/nn/plane_backward_reference.hpp"
#include "kernels/nn/plane_reference.hpp"
#include "kernels/runner.hpp"
#include "nvrtc_runtime/errors.hpp"
#include "tests/sm90_resources.hpp"
#include "tests/test_helpers.hpp"

using namespace lab;

namespace {

using Case = std::pair<std::string, Params>;  // runner, parameters

const std::vector<Case>& backward_cases() {
  static const std::vector<Case> cases = {
      {"maxpool2d_backward", {{"C", "6"}, {"H", "9"}, {"W", "7"}, {"K", "5"}}},
      {"maxpool2d_backward", {{"C", "4"}, {"H", "8"}, {"W", "11"}, {"K", "5"}, {"TIES", "true"}}},
      {"maxpool2d_backward",
       {{"B", "2"},
        {"C", "3"},
        {"H", "6"},
        {"W", "5"},
        {"K", "3"},
        {"TIES", "true"},
        {"ACCUMULATE", "true"}}},
      {"maxpool2d_backward", {{"C", "2"}, {"H", "3"}, {"W", "4"}, {"K", "9"}, {"TIES", "true"}}},
      {"maxpool2d_backward", {{"C", "2"}, {"H", "4"}, {"W", "3"}, {"K", "1"}, {"ACCUMULATE", "true"}}},
      // SPPF's 20x20 planes (v2's threads loop over 400 cells), and a plane too large for v2 (auto takes v1).
      {"maxpool2d_backward",
       {{"B", "2"},
        {"C", "3"},
        {"H", "20"},
        {"W", "20"},
        {"K", "5"},
        {"TIES", "true"},
        {"ACCUMULATE", "true"}}},
      {"maxpool2d_backward", {{"C", "1"}, {"H", "70"}, {"W", "60"}, {"K", "5"}, {"TIES", "true"}}},
      {"upsample_nearest2x_backward", {{"B", "2"}, {"C", "5"}, {"H", "3"}, {"W", "4"}}},
      {"upsample_nearest2x_backward", {{"C", "3"}, {"H", "1"}, {"W", "1"}, {"ACCUMULATE", "true"}}},
      {"add_planes", {{"B", "3"}, {"C", "7"}, {"H", "5"}, {"W", "3"}}},
      {"add_planes", {{"B", "2"}, {"C", "4"}, {"H", "3"}, {"W", "9"}, {"ACCUMULATE", "true"}}},
  };
  return cases;
}

void run_backward_runners(const std::string& backend_name) {
  auto backend = make_backend(backend_name, test::embedded_context());
  for (const auto& [kernel, given] : backward_cases()) {
    const Runner& r = Registry::instance().get(kernel);
    const Params p = resolve_params(r, given);
    for (const KernelVariant& variant : r.variants()) {  // every variant that runs the case
      if (!variant_refusal(r.spec(), variant.name, p).empty()) continue;
      auto inst = r.instantiate(*backend, variant.name, p, 13);
      for (int round = 0; round < 2; ++round) {  // after re-poisoning, a second launch must write everything
        inst->poison();
        inst->launch();
        for (const OutputCheck& c : inst->check(std::nullopt)) {
          INFO(backend_name << " " << kernel << "/" << variant.name << " " << c.output
                            << " rel_l2=" << c.metrics.rel_l2 << " max_abs=" << c.metrics.max_abs
                            << " non-finite=" << c.metrics.non_finite);
          CHECK(c.pass);
        }
      }
    }
  }
}

// Runs MaxPool2dBackwardOp's `variant` on one dense plane [1, 1, h, w] and returns dx.
std::vector<float> pool_backward_plane(PoolBackwardVariant variant, const std::vector<float>& x,
                                       const std::vector<float>& dy, int h, int w, int kernel) {
  auto backend = make_backend("cpu", test::embedded_context());
  NnBackwardKernels kernels(*backend);
  const MaxPool2dBackwardOp op(kernels, 1, kernel, variant);
  DeviceBuffer x_d = backend->upload_vector(x), dy_d = backend->upload_vector(dy);
  DeviceBuffer dx_d = backend->alloc_array<float>(x.size());
  op.run(1, h, w, dense_view(x_d.as<const float>(), 1, h * w), dense_view(dy_d.as<const float>(), 1, h * w),
         dense_view(dx_d.as<float>(), 1, h * w), GradientWrite::Overwrite);
  return backend->download_vector<float>(dx_d, x.size());
}

std::vector<float> as_float(const std::vector<double>& v) {
  return {v.begin(), v.end()};
}

double dot(const std::vector<double>& a, const std::vector<float>& b) {
  return std::inner_product(a.begin(), a.end(), b.begin(), 0.0);
}

}  // namespace

TEST_CASE("nn backward runners match their references on the cpu backend", "[nn_bwd]") {
  run_backward_runners("cpu");
}

TEST_CASE("nn backward runners match their references on the cuda backend", "[nn_bwd][gpu]") {
  LAB_REQUIRE_GPU_OR_SKIP();
  run_backward_runners("cuda");
}

TEST_CASE("maxpool2d_backward gives a tie to the first maximum in scan order, as PyTorch's CUDA pool",
          "[nn_bwd]") {
  const float inf = INFINITY, nan = NAN;
  const PoolBackwardVariant variant = GENERATE(PoolBackwardVariant::Direct, PoolBackwardVariant::PlaneSmem);
  INFO("variant " << (variant == PoolBackwardVariant::Direct ? "v1_direct" : "v2_plane_smem"));
  SECTION("a constant 3x3 plane, K = 3: each window goes to its first cell inside the plane") {
    // Window (y, x) starts at (max(y-1, 0), max(x-1, 0)): (0,0) wins the four windows around it, (0,1) the
    // two of column 2, (1,0) the two of row 2, (1,1) window (2,2).
    const std::vector<float> x(9, 0.5f), dy(9, 1.0f);
    const std::vector<float> expected = {4, 2, 0, 2, 1, 0, 0, 0, 0};
    CHECK(pool_backward_plane(variant, x, dy, 3, 3, 3) == expected);
    CHECK(as_float(maxpool2d_backward_reference(x, dy, 1, 1, 3, 3, 3)) == expected);
  }
  SECTION("NaN replaces the maximum (the last NaN of a window wins), 1x4, K = 3") {
    // Windows: {1, NaN} -> cell 1; {1, NaN, 3} -> cell 1; {NaN, 3, NaN} -> cell 3; {3, NaN} -> cell 3.
    const std::vector<float> x = {1, nan, 3, nan}, dy = {1, 2, 4, 8};
    const std::vector<float> expected = {0, 3, 0, 12};
    CHECK(pool_backward_plane(variant, x, dy, 1, 4, 3) == expected);
    CHECK(as_float(maxpool2d_backward_reference(x, dy, 1, 1, 1, 4, 3)) == expected);
  }
  SECTION("a window of -inf only goes to its first cell, 1x3, K = 3") {
    const std::vector<float> x(3, -inf), dy = {1, 2, 4};
    const std::vector<float> expected = {3, 4, 0};  // windows {0,1} and {0,1,2} -> 0, {1,2} -> 1
    CHECK(pool_backward_plane(variant, x, dy, 1, 3, 3) == expected);
    CHECK(as_float(maxpool2d_backward_reference(x, dy, 1, 1, 1, 3, 3)) == expected);
  }
}

TEST_CASE("the backward references match central finite differences of the forward references", "[nn_bwd]") {
  const int batch = 1, channels = 2, h = 5, w = 6;
  const size_t n = size_t(batch) * channels * h * w;
  SECTION("max pool, K = 5: distinct values one apart, so a step of 0.25 never changes an arg-max") {
    std::vector<float> x(n);
    for (size_t i = 0; i < n; ++i)
      x[i] = float((i * 37) % n);  // a permutation of 0 .. n-1 (37 coprime to 60)
    const std::vector<float> dy = random_uniform(n, -1, 1, 5);
    const std::vector<double> grad = maxpool2d_backward_reference(x, dy, batch, channels, h, w, 5);
    for (size_t q = 0; q < n; ++q) {
      std::vector<float> plus = x, minus = x;
      plus[q] += 0.25f;
      minus[q] -= 0.25f;
      const double fd = (dot(maxpool2d_reference(plus, batch, channels, h, w, 5), dy) -
                         dot(maxpool2d_reference(minus, batch, channels, h, w, 5), dy)) /
                        0.5;
      INFO("cell " << q);
      CHECK(grad[q] == Approx(fd).margin(1e-12));
    }
  }
  SECTION("nearest x2 upsample") {
    const std::vector<float> x = random_uniform(n, -1, 1, 6), dy = random_uniform(4 * n, -1, 1, 7);
    const std::vector<double> grad = upsample_nearest2x_backward_reference(dy, batch, channels, h, w);
    for (size_t q = 0; q < n; ++q) {
      std::vector<float> plus = x, minus = x;
      plus[q] += 0.25f;
      minus[q] -= 0.25f;
      const double fd = (dot(upsample_nearest2x_reference(plus, batch, channels, h, w), dy) -
                         dot(upsample_nearest2x_reference(minus, batch, channels, h, w), dy)) /
                        (double(plus[q]) - double(minus[q]));
      INFO("cell " << q);
      CHECK(grad[q] == Approx(fd).epsilon(1e-6));
    }
  }
}

TEST_CASE("nn backward parameter rules and op checks name the op", "[nn_bwd]") {
  const Runner& pool = Registry::instance().get("maxpool2d_backward");
  CHECK_THROWS_WITH(resolve_params(pool, {{"K", "4"}}), Catch::Contains("must be odd"));
  CHECK_THROWS_WITH(pool.compile_request("v2_plane_smem", resolve_params(pool, {{"H", "65"}, {"W", "64"}})),
                    Catch::Contains("v2_plane_smem needs H*W <= 4096"));
  CHECK_NOTHROW(pool.compile_request("v2_plane_smem", resolve_params(pool, {{"H", "64"}, {"W", "64"}})));
  auto backend = make_backend("cpu", test::embedded_context());
  NnBackwardKernels kernels(*backend);
  CHECK_THROWS_WITH(MaxPool2dBackwardOp(kernels, 4, 2), Catch::Contains("maxpool2d_backward"));
  DeviceBuffer buf = backend->alloc_array<float>(64);
  const PlaneView v = dense_view(buf.as<float>(), 4, 16);
  const MaxPool2dBackwardOp op(kernels, 4, 5);
  CHECK_THROWS_WITH(op.run(1, 4, 4, v, ConstPlaneView{}, v, GradientWrite::Overwrite),
                    Catch::Contains("maxpool2d_backward: null"));
  DeviceBuffer big = backend->alloc_array<float>(65 * 64);
  const PlaneView big_view = dense_view(big.as<float>(), 1, 65 * 64);
  CHECK_THROWS_WITH(MaxPool2dBackwardOp(kernels, 1, 5, PoolBackwardVariant::PlaneSmem)
                        .run(1, 65, 64, big_view, big_view, big_view, GradientWrite::Overwrite),
                    Catch::Contains("maxpool2d_backward: v2_plane_smem needs H*W <= 4096"));
  CHECK_THROWS_WITH(UpsampleNearest2xBackwardOp(kernels).run(1, 4, 0, 2, v, v, GradientWrite::Overwrite),
                    Catch::Contains("upsample_nearest2x_backward: bad plane"));
  CHECK_THROWS_WITH(AddPlanesOp(kernels).run(0, 4, 16, v, v, GradientWrite::Accumulate),
                    Catch::Contains("add_planes: bad size"));
}

TEST_CASE("the nn backward module compiles for sm_90 without spills", "[nn_bwd]") {
  test::check_compiles_for_sm90_without_spills(nn_backward_module_request());
}
