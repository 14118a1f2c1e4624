// Every precision reports the objects fp32 reports (docs/detect.md, "Precision"): the detections of our
// kernels at tf32 / fp16 / bf16 (each layer at the precision precision_policy.hpp gives it) against those of
// the float64-accumulating reference forward, fp32's stand-in (the fp32 kernel network matches it within
// 1e-4, test_kernel_network.cpp), on both sample photos in rect and square letterbox and on the project's
// synthetic scene. The same objects: every detection above conf 0.25 in one has a partner in the other of the
// same class, its score within 0.03 (tf32, fp16) or 0.1 (bf16) and every box coordinate within 3
// network-input pixels. On the cpu emulator at imgsz 224 (what CI affords) plus, on both layouts, the case
// that is bf16's tipping point (zidane.jpg at 640 square: the right person reported twice where a
// perturbation of bf16's size lands badly; docs/detect.md, "Precision"), on the GPU at 640.
// Every precision runs on the activation layout `auto` picks (fp16 / bf16 / tf32: NHWC on the emulator and on
// an H200; fp32 NHWC on an H200, NCHW on the emulator), and fp16 / bf16 on NCHW keep a case of their own (fp32
// and tf32 too on the GPU; on the emulator the layer-by-layer test_kernel_network.cpp covers tf32's NCHW
// network). Each comparison prints its worst score and box differences (docs/detect.md quotes them).
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <tuple>

#include "tests/network_test_support.hpp"
#include "pipeline/detect/detector.hpp"
#include "pipeline/image/image.hpp"
#include "tests/test_helpers.hpp"

using namespace lab;

namespace {

constexpr float kConf = 0.25f;
constexpr float kBoxTolerance = 3.0f;  // pixels of the network input

float score_tolerance(Precision p) {
  return p == Precision::Bf16 ? 0.1f : 0.03f;
}

struct Sample {
  std::string name;
  Image image;
};

const std::vector<Sample>& samples() {
  static const std::vector<Sample> all = [] {
    const auto images = test::assets_dir() / "images";
    return std::vector<Sample>{
        {"bus.jpg", decode_image(images / "bus.jpg")},
        {"zidane.jpg", decode_image(images / "zidane.jpg")},
        {"scene.png", decode_image(std::filesystem::path(LAB_SOURCE_DIR) / "docs/viewer/scene.png")}};
  }();
  return all;
}

// One forward per image (the rect shapes differ), rows as above.
std::vector<float> detect_sample(Detector& detector, const Sample& s) {
  return test::input_pixel_rows(detector.detect({&s.image}, {s.name})[0]);
}

// The reference forward's rows for (sample, imgsz, rect, conf), computed once per test run.
const std::vector<float>& reference_rows(const Yolo26Model& model, const Sample& s, int imgsz, bool rect,
                                         float conf) {
  static std::map<std::tuple<std::string, int, bool, float>, std::vector<float>> cache;
  const auto key = std::make_tuple(s.name, imgsz, rect, conf);
  if (auto it = cache.find(key); it != cache.end()) return it->second;
  DetectorOptions options;
  options.imgsz = imgsz, options.rect = rect, options.conf = conf;
  Detector reference(model, "reference", test::embedded_context(), options);
  return cache[key] = detect_sample(reference, s);
}

// The largest score and coordinate differences between each `want` row above kConf and its nearest
// same-class row of `got`.
std::pair<float, float> worst_differences(const std::vector<float>& got, const std::vector<float>& want) {
  float score = 0, box = 0;
  for (size_t i = 0; i * 6 < want.size(); ++i) {
    const float* w = &want[i * 6];
    if (!(w[4] > kConf)) continue;
    float best_box = INFINITY, best_score = INFINITY;
    for (size_t j = 0; j * 6 < got.size(); ++j) {
      const float* g = &got[j * 6];
      if (g[5] != w[5]) continue;
      float d = 0;
      for (int k = 0; k < 4; ++k) d = std::max(d, std::fabs(g[k] - w[k]));
      if (d < best_box) best_box = d, best_score = std::fabs(g[4] - w[4]);
    }
    score = std::max(score, best_score), box = std::max(box, best_box);
  }
  return {score, box};
}

// Detections of our kernels on `executor` at `precision` against the reference's, for the samples named in
// `only` (all when empty) in the letterbox modes `rects`.
void check_agreement(const std::string& executor, int imgsz, Precision precision,
                     std::vector<bool> rects = {true, false}, const std::string& only = "",
                     LayoutChoice layout = LayoutChoice::Auto) {
  LAB_SHARED_YOLO26N_OR_RETURN(model);
  const float score_tol = score_tolerance(precision);
  for (bool rect : rects) {
    // Both sides keep rows down to conf - tolerance, so an object just above conf on one side finds its
    // partner just below it on the other.
    DetectorOptions options;
    options.imgsz = imgsz, options.rect = rect, options.conf = kConf - score_tol;
    options.precision = precision, options.layout = layout;
    Detector kernels(*model, executor, test::embedded_context(), options);
    for (const Sample& sample : samples()) {
      if (!only.empty() && sample.name != only) continue;
      CAPTURE(sample.name, rect, precision_name(precision), kernels.activation_layout());
      const std::vector<float> got = detect_sample(kernels, sample);
      const std::vector<float>& want = reference_rows(*model, sample, imgsz, rect, options.conf);
      CHECK(test::match_detections(got, want, kConf, score_tol, kBoxTolerance) == "");
      const auto [score, box] = worst_differences(got, want);
      std::printf("detections %s %s %s imgsz %d %s %s: worst score diff %.4f, box diff %.2f px\n",
                  executor.c_str(), precision_name(precision).c_str(), kernels.activation_layout().c_str(),
                  imgsz, rect ? "rect" : "square", sample.name.c_str(), score, box);
    }
  }
}

constexpr int kCpuImgsz = 224;

}  // namespace

TEST_CASE("tf32 detections on the cpu emulator are fp32's: both photos and the scene, rect and square",
          "[agreement]") {
  check_agreement("cpu", kCpuImgsz, Precision::Tf32);
}

TEST_CASE("fp16 detections on the cpu emulator are fp32's: both photos and the scene, rect and square",
          "[agreement]") {
  check_agreement("cpu", kCpuImgsz, Precision::Fp16);
}

TEST_CASE("bf16 detections on the cpu emulator are fp32's: both photos and the scene, rect and square",
          "[agreement]") {
  check_agreement("cpu", kCpuImgsz, Precision::Bf16);
}

TEST_CASE("fp16 and bf16 detections of the float32 NCHW network on the cpu emulator are fp32's: bus.jpg rect",
          "[agreement]") {
  for (Precision precision : {Precision::Fp16, Precision::Bf16})
    check_agreement("cpu", kCpuImgsz, precision, {true}, "bus.jpg", LayoutChoice::Nchw);
}

TEST_CASE("bf16 on the cpu emulator reports zidane.jpg's two persons once each at 640 square, as fp32",
          "[agreement]") {
  check_agreement("cpu", 640, Precision::Bf16, {false}, "zidane.jpg");
  check_agreement("cpu", 640, Precision::Bf16, {false}, "zidane.jpg", LayoutChoice::Nchw);
}

TEST_CASE(
    "every precision's detections on the GPU at 640 are fp32's: both photos and the scene, rect and square",
    "[agreement][gpu]") {
  LAB_REQUIRE_GPU_OR_SKIP();
  for (Precision precision : kPrecisions) check_agreement("cuda", 640, precision);
  for (Precision precision : {Precision::Fp32, Precision::Tf32, Precision::Fp16, Precision::Bf16})
    check_agreement("cuda", 640, precision, {true, false}, "", LayoutChoice::Nchw);
}
