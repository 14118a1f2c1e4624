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
// "times_ms"}.
nlohmann::json image_json(const ImageDetections& result);

// {"model", "backend", "imgsz", "images": [image_json...]}.
nlohmann::json detections_json(const std::string& model, const std::string& backend, int imgsz,
                               const std::vector<ImageDetections>& results);

}  // namespace lab
