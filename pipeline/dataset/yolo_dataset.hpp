// A split of a YOLO-format dataset: its images (folders searched recursively, or list files of image paths,
// "./x" relative to the list's folder, as Ultralytics reads them), each paired with its label file the
// Ultralytics way (the last "/images/" of the path becomes "/labels/", the extension ".txt"), and the labels
// checked. What is wrong with the data decides what happens (docs/training-data.md):
// - errors (UsageError, one line naming the file): a missing split folder or list file, a split without
//   images;
// - skipped and counted as corrupt, with a warning naming the file and line: a label line without 5 fields or
//   with a field that is not a number, a class id that is not an integer, is negative or is beyond `names`,
//   coordinates outside [0, 1]; an image that does not decode (found by whoever decodes it: note_undecodable);
// - kept and counted: a missing label file or an empty one (a background image); duplicate label lines are
//   removed and counted.
#pragma once
#include <filesystem>
#include <string>
#include <vector>

#include "pipeline/dataset/data_yaml.hpp"
#include "pipeline/loss/labels.hpp"

namespace lab::dataset {

// "/a/images/train/x.jpg" -> "/a/labels/train/x.txt"
std::filesystem::path label_path_for(const std::filesystem::path& image);

enum class LabelFile { boxes, missing, empty };

struct Sample {
  std::filesystem::path image, label;
  std::vector<loss::YoloLabel> labels;  // normalised to the image; empty for a background image
  LabelFile label_file = LabelFile::missing;
};

struct SplitReport {
  size_t images = 0;                  // image files found
  size_t labelled = 0;                // with a label file holding at least one box
  size_t missing = 0;                 // no label file (background)
  size_t empty = 0;                   // an empty label file (background)
  size_t corrupt = 0;                 // skipped
  size_t duplicates = 0;              // label lines removed as duplicates
  std::vector<std::string> warnings;  // one line per skipped image or removed duplicate, in file order

  // "8 images, 6 labelled, 1 background (1 no label file, 0 empty label files), 1 corrupt skipped"
  std::string summary() const;
  // Records a skipped image with its one-line reason.
  void note_corrupt(const std::string& reason);
  // Moves a sample counted by its label file to the corrupt ones: its image did not decode.
  void note_undecodable(const Sample& sample, const std::string& reason);
};

struct Split {
  std::vector<Sample> samples;  // usable images, sorted by path
  SplitReport report;
};

// The image files of a split's sources, sorted; UsageError as above.
std::vector<std::filesystem::path> split_images(const std::vector<std::filesystem::path>& sources);

// Reads split "train" or "val" of `config`: its images and their checked labels.
Split read_split(const DataConfig& config, const std::string& split);

}  // namespace lab::dataset
