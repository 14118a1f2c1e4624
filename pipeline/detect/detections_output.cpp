// Formatting of detection results (text lines, YOLO labels, JSON).
#include "pipeline/detect/detections_output.hpp"

#include <cstdio>
#include <filesystem>
#include <map>

#include "nvrtc_runtime/printable_text.hpp"

namespace lab {
namespace {

std::string fixed(double v, int digits) {
  char buffer[64];
  std::snprintf(buffer, sizeof buffer, "%.*f", digits, v);
  return buffer;
}

std::string general(double v) {
  char buffer[64];
  std::snprintf(buffer, sizeof buffer, "%g", v);
  return buffer;
}

}  // namespace

std::string summary_line(const ImageDetections& r) {
  std::string line = std::filesystem::path(r.file).filename().string() + ": " +
                     std::to_string(r.geometry.height) + "x" + std::to_string(r.geometry.width) + " ";
  std::map<int, std::pair<std::string, int>> counts;  // class id -> (name, count)
  for (const Detection& d : r.detections) {
    auto& entry = counts[d.class_id];
    entry.first = d.name;
    ++entry.second;
  }
  if (counts.empty()) line += "(no detections), ";
  for (const auto& [id, entry] : counts)
    line += std::to_string(entry.second) + " " + entry.first + (entry.second > 1 ? "s" : "") + ", ";
  // The file name and the checkpoint's class names are untrusted: escaped, one line.
  return printable(line + fixed(r.times.inference_ms, 1) + "ms");
}

std::string speed_line(const std::vector<ImageDetections>& results) {
  StageTimes sum;
  for (const ImageDetections& r : results) {
    sum.preprocess_ms += r.times.preprocess_ms;
    sum.inference_ms += r.times.inference_ms;
    sum.postprocess_ms += r.times.postprocess_ms;
  }
  const double n = results.empty() ? 1.0 : double(results.size());
  const ImageDetections last = results.empty() ? ImageDetections{} : results.back();
  return "Speed: " + fixed(sum.preprocess_ms / n, 1) + "ms pre-process, " + fixed(sum.inference_ms / n, 1) +
         "ms inference, " + fixed(sum.postprocess_ms / n, 1) + "ms post-process per image at shape (" +
         std::to_string(last.batch) + ", 3, " + std::to_string(last.geometry.height) + ", " +
         std::to_string(last.geometry.width) + ")";
}

std::string yolo_label_text(const ImageDetections& r) {
  std::string text;
  const double w = r.width, h = r.height;
  for (const Detection& d : r.detections) {
    const double cx = (d.x1 + d.x2) / 2.0 / w, cy = (d.y1 + d.y2) / 2.0 / h;
    const double bw = (d.x2 - d.x1) / w, bh = (d.y2 - d.y1) / h;
    text += std::to_string(d.class_id) + " " + general(cx) + " " + general(cy) + " " + general(bw) + " " +
            general(bh) + " " + general(d.score) + "\n";
  }
  return text;
}

nlohmann::json image_json(const ImageDetections& r) {
  nlohmann::json detections = nlohmann::json::array();
  for (const Detection& d : r.detections)
    detections.push_back(
        {{"class", d.class_id}, {"name", d.name}, {"score", d.score}, {"xyxy", {d.x1, d.y1, d.x2, d.y2}}});
  return {{"file", std::filesystem::path(r.file).lexically_normal().string()},
          {"width", r.width},
          {"height", r.height},
          {"shape", {r.geometry.height, r.geometry.width}},
          {"detections", detections},
          {"times_ms",
           {{"preprocess", r.times.preprocess_ms},
            {"inference", r.times.inference_ms},
            {"postprocess", r.times.postprocess_ms}}}};
}

nlohmann::json detections_json(const DetectRunInfo& run, const std::vector<ImageDetections>& results) {
  nlohmann::json images = nlohmann::json::array();
  for (const ImageDetections& r : results) images.push_back(image_json(r));
  nlohmann::json out = {{"lab_version", run.lab_version},
                        {"model", std::filesystem::path(run.model).lexically_normal().string()},
                        {"backend", run.backend},
                        {"precision", run.precision},
                        {"layout", run.layout},
                        {"imgsz", run.imgsz},
                        {"conf", run.conf},
                        {"letterbox", run.rect ? "rect" : "square"}};
  if (!run.classes.empty()) out["classes"] = run.classes;
  out["images"] = images;
  return out;
}

}  // namespace lab
