// YOLO label files and the letterbox mapping into the network input.
#include "pipeline/loss/labels.hpp"

#include <cmath>
#include <sstream>

#include <nlohmann/json.hpp>

#include "nvrtc_runtime/errors.hpp"
#include "nvrtc_runtime/input_file.hpp"
#include "nvrtc_runtime/printable_text.hpp"
#include "pipeline/image/letterbox.hpp"

namespace lab::loss {
namespace {

constexpr size_t kMaxQuoted = 80;  // bytes of a label line or token quoted in a message

}  // namespace

std::vector<YoloLabel> read_yolo_labels(const std::filesystem::path& path) {
  std::istringstream in(read_input_file(path, "labels file"));
  std::vector<YoloLabel> labels;
  std::string line;
  for (int number = 1; std::getline(in, line); ++number) {
    std::istringstream fields(line);
    std::string first;
    if (!(fields >> first) || first[0] == '#') continue;
    const std::string at = printable_path(path) + ":" + std::to_string(number) + ": ";
    YoloLabel label;
    label.line = number;
    size_t used = 0;
    try {
      label.cls = std::stoi(first, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (used != first.size() || label.cls < 0)
      throw UsageError(at + "class '" + printable(first, kMaxQuoted) + "' is not an integer >= 0");
    std::string extra;
    if (!(fields >> label.cx >> label.cy >> label.w >> label.h) || (fields >> extra))
      throw UsageError(at + "expected 'class cx cy w h' (5 numbers), got '" + printable(line, kMaxQuoted) +
                       "'");
    if (label.w < 0 || label.h < 0) throw UsageError(at + "negative width or height");
    labels.push_back(label);
  }
  return labels;
}

Letterbox image_letterbox(int original_width, int original_height, int imgsz, bool rect) {
  const LetterboxGeometry g = letterbox_geometry(original_width, original_height, imgsz, rect);
  Letterbox box;
  box.original_width = original_width;
  box.original_height = original_height;
  box.input_width = g.width;
  box.input_height = g.height;
  box.scale = g.ratio;
  box.pad_x = g.left;
  box.pad_y = g.top;
  return box;
}

namespace {

nlohmann::json parse_json_file(const std::filesystem::path& path) {
  const std::string text = read_input_file(path, "JSON file");
  try {
    return nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    throw UsageError(printable_path(path) + ": not valid JSON (" + printable(e.what(), kMaxQuoted) + ")");
  }
}

std::vector<YoloLabel> labels_of(const nlohmann::json& doc, const std::filesystem::path& path) {
  const std::string key = "labels_yolo_txt_original_image";
  try {
    std::vector<YoloLabel> labels;
    for (const auto& row : doc.at(key)) {
      if (row.size() != 5)
        throw UsageError(printable_path(path) + ": " + key + " rows must be [class, cx, cy, w, h]");
      labels.push_back({static_cast<int>(row[0].get<double>()), row[1].get<double>(), row[2].get<double>(),
                        row[3].get<double>(), row[4].get<double>()});
    }
    return labels;
  } catch (const nlohmann::json::exception& e) {
    throw UsageError(printable_path(path) + ": needs " + key + " as a list of [class, cx, cy, w, h] (" +
                     e.what() + ")");
  }
}

Letterbox letterbox_of(const nlohmann::json& doc, const std::filesystem::path& path) {
  const std::string at = printable_path(path) + ": ";
  try {
    const auto& lb = doc.at("letterbox");
    Letterbox box;
    box.scale = lb.at("scale").get<double>();
    box.pad_x = lb.at("pad_left_top").at(0).get<double>();
    box.pad_y = lb.at("pad_left_top").at(1).get<double>();
    if (!(box.scale > 0)) throw UsageError(at + "letterbox.scale must be positive");
    box.input_width = lb.at("size").at(0).get<int>();
    box.input_height = lb.at("size").at(1).get<int>();
    if (lb.contains("original_size")) {
      box.original_width = lb["original_size"].at(0).get<int>();
      box.original_height = lb["original_size"].at(1).get<int>();
    } else {
      box.original_width = static_cast<int>(std::lround((box.input_width - 2 * box.pad_x) / box.scale));
      box.original_height = static_cast<int>(std::lround((box.input_height - 2 * box.pad_y) / box.scale));
    }
    if (box.input_width <= 0 || box.input_height <= 0)
      throw UsageError(at + "letterbox.size must be positive");
    if (box.original_width <= 0 || box.original_height <= 0)
      throw UsageError(at + "the letterbox gives a non-positive original image size");
    return box;
  } catch (const nlohmann::json::exception& e) {
    throw UsageError(at + "needs letterbox.scale, letterbox.pad_left_top [x, y] and letterbox.size [w, h] (" +
                     e.what() + ")");
  }
}

}  // namespace

std::vector<YoloLabel> read_labels_json(const std::filesystem::path& path) {
  return labels_of(parse_json_file(path), path);
}

Letterbox read_letterbox_json(const std::filesystem::path& path) {
  return letterbox_of(parse_json_file(path), path);
}

LabelsFile read_labels_file(const std::filesystem::path& path) {
  if (path.extension() != ".json") return {read_yolo_labels(path), std::nullopt};
  const nlohmann::json doc = parse_json_file(path);
  LabelsFile file{labels_of(doc, path), std::nullopt};
  if (doc.contains("letterbox")) file.letterbox = letterbox_of(doc, path);
  return file;
}

std::vector<GtBox> labels_to_input(const std::vector<YoloLabel>& labels, const Letterbox& letterbox) {
  std::vector<GtBox> boxes;
  const double sx = letterbox.original_width * letterbox.scale,
               sy = letterbox.original_height * letterbox.scale;
  for (const YoloLabel& l : labels)
    boxes.push_back({l.cls, (l.cx - l.w / 2) * sx + letterbox.pad_x, (l.cy - l.h / 2) * sy + letterbox.pad_y,
                     (l.cx + l.w / 2) * sx + letterbox.pad_x, (l.cy + l.h / 2) * sy + letterbox.pad_y});
  return boxes;
}

}  // namespace lab::loss
