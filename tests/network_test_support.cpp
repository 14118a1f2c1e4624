// Shared pieces of the network tests.
#include "tests/network_test_support.hpp"

#include <cmath>
#include <memory>
#include <sstream>

#include "pipeline/checkpoint/checkpoint.hpp"
#include "pipeline/safetensors.hpp"

namespace lab::test {

std::filesystem::path assets_dir() { return LAB_ASSETS_DIR; }

std::vector<float> bus640_input() {
  return SafetensorsFile::load(assets_dir() / "goldens" / "bus640_golden_0.safetensors")
      .floats("input", {1, 3, 640, 640});
}

const Yolo26Model* shared_yolo26n() {
  static const std::unique_ptr<Yolo26Model> model = []() -> std::unique_ptr<Yolo26Model> {
    const auto path = assets_dir() / "models" / "yolo26n.pt";
    if (!std::filesystem::exists(path)) return nullptr;
    return std::make_unique<Yolo26Model>(Yolo26Model::from_checkpoint(load_checkpoint(path)));
  }();
  return model.get();
}

double relative_l2(const std::vector<float>& got, const std::vector<float>& want) {
  if (got.size() != want.size()) return INFINITY;
  double diff = 0, norm = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    const double d = double(got[i]) - double(want[i]);
    diff += d * d;
    norm += double(want[i]) * double(want[i]);
  }
  return std::sqrt(diff) / std::max(std::sqrt(norm), 1e-30);
}

double relative_l2(const std::vector<double>& got, const std::vector<double>& want) {
  double diff = 0, norm = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    diff += (got[i] - want[i]) * (got[i] - want[i]);
    norm += want[i] * want[i];
  }
  return norm > 0 ? std::sqrt(diff / norm) : std::sqrt(diff);
}

size_t non_finite_count(const std::vector<float>& values) {
  size_t n = 0;
  for (float v : values) n += !std::isfinite(v);
  return n;
}

namespace {

// First row of `rows` matching `row` within the tolerances, or -1.
long find_match(const std::vector<float>& rows, const float* row, float score_tol, float box_tol,
                std::vector<bool>& used) {
  for (size_t j = 0; j * 6 < rows.size(); ++j) {
    const float* r = &rows[j * 6];
    if (used[j] || r[5] != row[5] || std::fabs(r[4] - row[4]) > score_tol) continue;
    bool close = true;
    for (int k = 0; k < 4; ++k) close = close && std::fabs(r[k] - row[k]) <= box_tol;
    if (close) {
      used[j] = true;
      return long(j);
    }
  }
  return -1;
}

std::string one_way(const std::vector<float>& from, const std::vector<float>& to, float min_score,
                    float score_tol, float box_tol, const char* label) {
  std::vector<bool> used(to.size() / 6, false);
  for (size_t i = 0; i * 6 < from.size(); ++i) {
    const float* row = &from[i * 6];
    if (!(row[4] > min_score)) continue;
    if (find_match(to, row, score_tol, box_tol, used) < 0) {
      std::ostringstream s;
      s << label << " row " << i << " (class " << row[5] << ", score " << row[4] << ", box " << row[0] << " "
        << row[1] << " " << row[2] << " " << row[3] << ") has no match";
      return s.str();
    }
  }
  return "";
}

}  // namespace

std::string match_detections(const std::vector<float>& got, const std::vector<float>& expected, float min_score,
                             float score_tol, float box_tol) {
  // A row near the score threshold may sit just below it on the other side: search among all rows.
  std::string e = one_way(expected, got, min_score, score_tol, box_tol, "expected");
  if (!e.empty()) return e;
  return one_way(got, expected, min_score + score_tol, score_tol, box_tol, "produced");
}

std::vector<float> input_pixel_rows(const ImageDetections& d) {
  std::vector<float> rows;
  const float r = float(d.geometry.ratio), left = float(d.geometry.left), top = float(d.geometry.top);
  for (const Detection& det : d.detections)
    rows.insert(rows.end(), {det.x1 * r + left, det.y1 * r + top, det.x2 * r + left, det.y2 * r + top,
                             det.score, float(det.class_id)});
  return rows;
}

}  // namespace lab::test
