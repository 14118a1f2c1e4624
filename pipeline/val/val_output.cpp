// The table, the COCO line and the JSON document of `lab val`.
#include "pipeline/val/val_output.hpp"

#include <cstdio>
#include <filesystem>

#include "nvrtc_runtime/printable_text.hpp"
#include "pipeline/detect/detections_output.hpp"

namespace lab::val {
namespace {

std::string row(const std::string& name, size_t images, size_t instances, double p, double r, double map50,
                double map50_95) {
  char line[160];
  std::snprintf(line, sizeof line, "%22s%11zu%11zu%11.3g%11.3g%11.3g%11.3g\n", printable(name, 22).c_str(),
                images, instances, p, r, map50, map50_95);
  return line;
}

std::string class_name(const std::vector<std::string>& names, int cls) {
  return size_t(cls) < names.size() ? names[size_t(cls)] : std::to_string(cls);
}

}  // namespace

std::string metrics_table(const ValResult& result, const std::vector<std::string>& names) {
  char header[160];
  std::snprintf(header, sizeof header, "%22s%11s%11s%11s%11s%11s%11s\n", "Class", "Images", "Instances",
                "Box(P", "R", "mAP50", "mAP50-95)");
  const metrics::DetectionMetrics& m = result.metrics;
  std::string text = header + row("all", m.images, m.instances, m.precision, m.recall, m.map50, m.map50_95);
  for (const metrics::ClassMetrics& c : m.classes)
    text += row(class_name(names, c.cls), c.images, c.instances, c.precision, c.recall, c.map50, c.map50_95);
  return text;
}

std::string coco_line(const ValResult& result) {
  char line[160];
  std::snprintf(line, sizeof line,
                "COCO mAP50-95 %.3f, mAP50 %.3f (pycocotools' definition: maxDets 100, area all)",
                result.coco.map50_95, result.coco.map50);
  return line;
}

nlohmann::json val_json(const ValRunInfo& run, const ValResult& result,
                        const std::vector<std::string>& names) {
  const dataset::SplitReport& d = result.report;
  const metrics::DetectionMetrics& m = result.metrics;
  nlohmann::json classes = nlohmann::json::array();
  for (const metrics::ClassMetrics& c : m.classes)
    classes.push_back({{"class", c.cls},
                       {"name", class_name(names, c.cls)},
                       {"images", c.images},
                       {"instances", c.instances},
                       {"precision", c.precision},
                       {"recall", c.recall},
                       {"map50", c.map50},
                       {"map50_95", c.map50_95}});
  nlohmann::json images = nlohmann::json::array();
  for (const ImageDetections& image : result.images) images.push_back(image_json(image));
  return {{"lab_version", run.lab_version},
          {"data", std::filesystem::path(run.data).lexically_normal().string()},
          {"split", run.split},
          {"model", std::filesystem::path(run.model).lexically_normal().string()},
          {"backend", run.backend},
          {"precision", run.precision},
          {"layout", run.layout},
          {"imgsz", run.imgsz},
          {"conf", run.conf},
          {"dataset",
           {{"images", d.images},
            {"labelled", d.labelled},
            {"background_no_label", d.missing},
            {"background_empty", d.empty},
            {"corrupt", d.corrupt},
            {"duplicates", d.duplicates}}},
          {"metrics",
           {{"images", m.images},
            {"instances", m.instances},
            {"precision", m.precision},
            {"recall", m.recall},
            {"map50", m.map50},
            {"map50_95", m.map50_95}}},
          {"classes", classes},
          {"coco", {{"map50_95", result.coco.map50_95}, {"map50", result.coco.map50}, {"max_dets", 100}}},
          {"images", images}};
}

}  // namespace lab::val
