// What `lab val` prints and writes: the metrics table in Ultralytics' layout (Class, Images, Instances, P, R,
// mAP50, mAP50-95; "all" first, then each class with labels), the COCO line, and the JSON document.
#pragma once
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "pipeline/val/validator.hpp"

namespace lab::val {

std::string metrics_table(const ValResult& result, const std::vector<std::string>& names);

// "COCO mAP50-95 0.412, mAP50 0.603 (pycocotools' definition: maxDets 100, area all)"
std::string coco_line(const ValResult& result);

struct ValRunInfo {
  std::string lab_version, data, split, model, backend, precision;
  int imgsz = 640;
  float conf = 0.001f;
  std::string layout;  // the activation layout the network chose: "nchw" or "nhwc"
};

// {"lab_version", "data", "split", "model", "backend", "precision", "layout", "imgsz", "conf",
//  "dataset": {"images", "labelled", "background_no_label", "background_empty", "corrupt", "duplicates"},
//  "metrics": {"images", "instances", "precision", "recall", "map50", "map50_95"},
//  "classes": [{"class", "name", "images", "instances", "precision", "recall", "map50", "map50_95"}],
//  "coco": {"map50_95", "map50", "max_dets"},
//  "images": [lab detect's image_json: file, width, height, shape, detections, times_ms]}
nlohmann::json val_json(const ValRunInfo& run, const ValResult& result,
                        const std::vector<std::string>& names);

}  // namespace lab::val
