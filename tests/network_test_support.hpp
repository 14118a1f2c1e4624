// Shared pieces of the network tests: the shared checkpoint's model (loaded once per run), relative L2 of two
// tensors, and the matching of two detection lists (by class, score and box) in network-input pixels.
#pragma once
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "pipeline/detect/detection.hpp"
#include "pipeline/model/yolo26_model.hpp"

namespace lab::test {

// The model of ../shared/assets/models/yolo26n.pt, or nullptr (with a WARN by the caller) when absent.
const Yolo26Model* shared_yolo26n();
std::filesystem::path assets_dir();
// The golden letterboxed bus image [1, 3, 640, 640] of the shared assets (goldens/bus640_golden_0).
std::vector<float> bus640_input();

double relative_l2(const std::vector<float>& got, const std::vector<float>& want);
// The same of float64 tensors; absolute L2 when `want` is all zeros.
double relative_l2(const std::vector<double>& got, const std::vector<double>& want);
size_t non_finite_count(const std::vector<float>& values);

// Rows x1, y1, x2, y2, score, class. Every `expected` row with score > min_score must have a row in `got`
// of the same class with |score diff| <= score_tol and every coordinate within box_tol, and vice versa.
// Returns an empty string when they match, else a description of the first mismatch.
std::string match_detections(const std::vector<float>& got, const std::vector<float>& expected, float min_score,
                             float score_tol, float box_tol);
// One image's detections as such rows in network-input pixels (the letterbox's scale and padding undone).
std::vector<float> input_pixel_rows(const ImageDetections& d);

}  // namespace lab::test

// In a test: `name` = the shared checkpoint's model; where it is absent, a WARN naming it and `return
// __VA_ARGS__` (nothing in a TEST_CASE, nullptr in a helper returning a pointer).
#define LAB_SHARED_YOLO26N_OR_RETURN(name, ...)                       \
  const lab::Yolo26Model* name = lab::test::shared_yolo26n();         \
  if (!name) {                                                        \
    WARN("skipped: ../shared/assets/models/yolo26n.pt is absent");   \
    return __VA_ARGS__;                                               \
  }                                                                   \
  static_assert(true, "a semicolon follows")
