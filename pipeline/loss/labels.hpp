// Ground truth from a YOLO label file (`class cx cy w h` per line, normalised to the original image) mapped
// into the network input through a letterbox (scale, then padding), as Ultralytics' LetterBox maps labels.
#pragma once
#include <filesystem>
#include <optional>
#include <vector>

#include "pipeline/loss/loss_types.hpp"

namespace lab::loss {

struct YoloLabel {
  int cls = 0;
  double cx = 0, cy = 0, w = 0, h = 0;  // normalised to the original image
  int line = 0;                         // of the label file it was read from (0: not from a file)
};

// Blank lines and lines starting with '#' are skipped. Throws UsageError "FILE:LINE: ..." for a malformed
// line.
std::vector<YoloLabel> read_yolo_labels(const std::filesystem::path& path);

// The labels of a bus_loss.json-like file: "labels_yolo_txt_original_image": [[class, cx, cy, w, h], ...]
// (the same values as a label file, at full precision). Throws UsageError naming the file and the problem.
std::vector<YoloLabel> read_labels_json(const std::filesystem::path& path);

// Original image (width x height) -> network input (input_width x input_height): x' = x * scale + pad_x,
// y' = y * scale + pad_y.
struct Letterbox {
  int original_width = 0, original_height = 0;
  int input_width = 0, input_height = 0;
  double scale = 1, pad_x = 0, pad_y = 0;
};

// The letterbox `lab detect` applies to an original_width x original_height image (letterbox_geometry of
// pipeline/image: imgsz x imgsz, or with `rect` the smallest rectangle of multiples of 32).
Letterbox image_letterbox(int original_width, int original_height, int imgsz, bool rect);

// A bus_loss.json-like file: "letterbox": {"size": [W, H] (the input), "scale": s, "pad_left_top": [x, y]} and
// optionally "original_size": [w, h]; without it the original size is round((size - 2 * pad) / scale).
// Throws UsageError naming the file and the missing or malformed field.
Letterbox read_letterbox_json(const std::filesystem::path& path);

// The labels of LABELS.json (read_labels_json, with its letterbox when it holds one) or of a YOLO label file
// (read_yolo_labels, no letterbox: the caller must know how the original image was letterboxed).
struct LabelsFile {
  std::vector<YoloLabel> labels;
  std::optional<Letterbox> letterbox;
};
LabelsFile read_labels_file(const std::filesystem::path& path);

std::vector<GtBox> labels_to_input(const std::vector<YoloLabel>& labels, const Letterbox& letterbox);

}  // namespace lab::loss
