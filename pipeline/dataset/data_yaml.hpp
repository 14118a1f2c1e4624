// The Ultralytics dataset YAML (`path`, `train`, `val`, `names`, optional `nc`), read with yaml-cpp:
// `path` is the dataset root (relative: to the YAML file's folder; absent: that folder), `train` / `val` a
// folder, an image-list file or a list of them, relative to the root; `names` a list, or a mapping whose keys
// are 0..n-1; `nc`, when given, must equal the number of names (alone it names the classes class0, class1
// ...).
#pragma once
#include <filesystem>
#include <string>
#include <vector>

namespace lab::dataset {

struct DataConfig {
  std::filesystem::path yaml;                     // the file read
  std::filesystem::path root;                     // `path`, resolved
  std::vector<std::filesystem::path> train, val;  // resolved against root; empty when the key is absent
  std::vector<std::string> names;
};

// UsageError "<file>: ..." (with ":<line>" for YAML syntax errors and misplaced values) for an unreadable
// file, YAML that does not parse, a missing or malformed key; the split folders are not checked here (see
// yolo_dataset.hpp).
DataConfig read_data_yaml(const std::filesystem::path& yaml);

// The sources of split "train" or "val"; UsageError "<file>: no 'val' split" when the YAML has none.
const std::vector<std::filesystem::path>& split_sources(const DataConfig& config, const std::string& split);

}  // namespace lab::dataset
