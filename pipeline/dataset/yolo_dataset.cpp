// Listing a split's images, pairing them with label files and checking the labels (the rules are in
// yolo_dataset.hpp).
#include "pipeline/dataset/yolo_dataset.hpp"

#include <algorithm>
#include <cstdio>
#include <sstream>
#include <tuple>

#include "nvrtc_runtime/errors.hpp"
#include "nvrtc_runtime/input_file.hpp"
#include "nvrtc_runtime/printable_text.hpp"
#include "pipeline/detect/image_inputs.hpp"

namespace lab::dataset {

namespace fs = std::filesystem;
namespace {

void list_folder(const fs::path& folder, std::vector<fs::path>& images) {
  std::error_code ec;
  fs::recursive_directory_iterator it(folder, fs::directory_options::skip_permission_denied, ec), end;
  for (; !ec && it != end; it.increment(ec))
    if (it->is_regular_file(ec) && has_image_extension(it->path())) images.push_back(it->path());
  if (ec) throw UsageError(printable_path(folder) + ": cannot list the folder (" + ec.message() + ")");
}

// An image-list file: one path per line; "./x" is relative to the list's folder, other relative paths to
// the current folder (as Ultralytics reads them).
void read_list_file(const fs::path& list, std::vector<fs::path>& images) {
  std::istringstream in(read_input_file(list, "image list"));
  std::string line;
  while (std::getline(in, line)) {
    while (!line.empty() && (line.back() == '\r' || line.back() == ' ')) line.pop_back();
    if (line.empty()) continue;
    fs::path image = line.rfind("./", 0) == 0 ? list.parent_path() / line.substr(2) : fs::path(line);
    if (has_image_extension(image)) images.push_back(image.lexically_normal());
  }
}

bool in_unit_range(double v) {
  return v >= 0 && v <= 1;
}

// The problem of a label read from a file, or empty.
std::string label_problem(const loss::YoloLabel& l, size_t class_count) {
  if (size_t(l.cls) >= class_count)
    return "class " + std::to_string(l.cls) + " is beyond the dataset's " + std::to_string(class_count) +
           " classes (0 to " + std::to_string(class_count - 1) + ")";
  if (!in_unit_range(l.cx) || !in_unit_range(l.cy) || !in_unit_range(l.w) || !in_unit_range(l.h))
    return "coordinates must be normalised to [0, 1]";
  return "";
}

bool same_row(const loss::YoloLabel& a, const loss::YoloLabel& b) {
  return std::tie(a.cls, a.cx, a.cy, a.w, a.h) == std::tie(b.cls, b.cx, b.cy, b.w, b.h);
}

// Fills `sample.labels` and counts the sample; false when the sample is skipped (corrupt labels).
bool read_labels(Sample& sample, size_t class_count, SplitReport& report) {
  std::error_code ec;
  if (!fs::exists(sample.label, ec)) {
    ++report.missing;
    sample.label_file = LabelFile::missing;
    return true;
  }
  std::vector<loss::YoloLabel> labels;
  try {
    labels = loss::read_yolo_labels(sample.label);
  } catch (const UsageError& e) {
    report.note_corrupt(e.what());
    return false;
  }
  for (const loss::YoloLabel& l : labels) {
    const std::string problem = label_problem(l, class_count);
    if (!problem.empty()) {
      report.note_corrupt(printable_path(sample.label) + ":" + std::to_string(l.line) + ": " + problem);
      return false;
    }
    const bool duplicate = std::any_of(sample.labels.begin(), sample.labels.end(),
                                       [&](const loss::YoloLabel& kept) { return same_row(kept, l); });
    if (!duplicate) sample.labels.push_back(l);
  }
  if (const size_t removed = labels.size() - sample.labels.size(); removed > 0) {
    report.duplicates += removed;
    report.warnings.push_back(printable_path(sample.label) + ": " + std::to_string(removed) +
                              " duplicate label lines removed");
  }
  sample.label_file = sample.labels.empty() ? LabelFile::empty : LabelFile::boxes;
  ++(sample.labels.empty() ? report.empty : report.labelled);
  return true;
}

}  // namespace

fs::path label_path_for(const fs::path& image) {
  std::string text = "/" + image.string();  // so that a relative "images/x.jpg" has its "/images/" too
  const std::string images = "/images/";
  if (const size_t at = text.rfind(images); at != std::string::npos)
    text.replace(at, images.size(), "/labels/");
  text.erase(0, 1);
  return fs::path(text).replace_extension(".txt");
}

std::string SplitReport::summary() const {
  std::ostringstream s;
  s << images << " images, " << labelled << " labelled, " << (missing + empty) << " background (" << missing
    << " no label file, " << empty << " empty label files), " << corrupt << " corrupt skipped";
  if (duplicates > 0) s << ", " << duplicates << " duplicate labels removed";
  return s.str();
}

void SplitReport::note_corrupt(const std::string& reason) {
  ++corrupt;
  warnings.push_back(reason + " (corrupt: image skipped)");
}

void SplitReport::note_undecodable(const Sample& sample, const std::string& reason) {
  --(sample.label_file == LabelFile::boxes   ? labelled
     : sample.label_file == LabelFile::empty ? empty
                                             : missing);
  note_corrupt(reason);
}

std::vector<fs::path> split_images(const std::vector<fs::path>& sources) {
  std::vector<fs::path> images;
  std::string names;
  for (const fs::path& source : sources) {
    std::error_code ec;
    const fs::file_status status = fs::status(source, ec);
    if (fs::is_directory(status))
      list_folder(source, images);
    else if (fs::exists(status))
      read_list_file(source, images);
    else
      throw UsageError(
          printable_path(source) + ": " +
          (ec && ec != std::errc::no_such_file_or_directory ? ec.message() : "no such folder or image list"));
    names += (names.empty() ? "" : ", ") + printable_path(source);
  }
  if (images.empty()) throw UsageError("no images (jpg, jpeg, png, bmp) in " + names);
  std::sort(images.begin(), images.end());
  images.erase(std::unique(images.begin(), images.end()), images.end());
  return images;
}

Split read_split(const DataConfig& config, const std::string& split) {
  Split result;
  const std::vector<fs::path> images = split_images(split_sources(config, split));
  result.report.images = images.size();
  for (const fs::path& image : images) {
    Sample sample{image, label_path_for(image), {}, LabelFile::missing};
    if (read_labels(sample, config.names.size(), result.report)) result.samples.push_back(std::move(sample));
  }
  return result;
}

}  // namespace lab::dataset
