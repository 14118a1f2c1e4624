// Text and JSON forms of detection results: the per-image summary line ("bus.jpg: 640x480 4 persons, 1 bus,
// 3.1ms"), the closing speed line, YOLO-format label text, and the JSON document of `lab detect --json`.
#pragma once
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "pipeline/detect/detection.hpp"

namespace lab {

// "<file name>: <h>x<w> <n> <name>[s], ..., <inference ms>ms" with classes in id order; "(no detections)"
// when there are none. Escaped (printable_text.hpp): file and class names come from untrusted files.
std::string summary_line(const ImageDetections& result);

// Averages over `results`: "Speed: 1.2ms pre-process, 3.1ms inference, 0.5ms post-process per image at shape
// (B, 3, H, W)" with the batch and shape of the last image's forward.
std::string speed_line(const std::vector<ImageDetections>& results);

// One line per detection: "class cx cy w h score", box normalised by the source width and height (%g).
std::string yolo_label_text(const ImageDetections& result);

// {"file", "width", "height", "shape": [h, w], "detections": [{"class", "name", "score", "xyxy"}],
// "times_ms"}; the file path lexically normalised ("./a//b.jpg" -> "a/b.jpg").
nlohmann::json image_json(const ImageDetections& result);

// How a `lab detect` run was made, recorded in its JSON document.
struct DetectRunInfo {
  std::string lab_version, model, backend, precision;
  int imgsz = 640;
  float conf = 0.25f;
  bool rect = true;          // letterbox "rect" (minimum rectangle) or "square"
  std::vector<int> classes;  // --classes; empty: every class
  std::string layout;        // the activation layout the network chose: "nchw" or "nhwc"
};

// {"lab_version", "model", "backend", "precision", "layout", "imgsz", "conf", "letterbox", ["classes",]
// "images": [image_json...]}, paths lexically normalised; "classes" only when the run filtered them.
nlohmann::json detections_json(const DetectRunInfo& run, const std::vector<ImageDetections>& results);

}  // namespace lab
