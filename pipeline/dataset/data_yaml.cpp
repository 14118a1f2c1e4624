// Reading the dataset YAML with yaml-cpp; every problem becomes one line naming the file and, where yaml-cpp
// knows it, the line.
#include "pipeline/dataset/data_yaml.hpp"

#include <map>

#include <yaml-cpp/yaml.h>

#include "nvrtc_runtime/errors.hpp"
#include "nvrtc_runtime/input_file.hpp"
#include "nvrtc_runtime/printable_text.hpp"

namespace lab::dataset {

namespace fs = std::filesystem;
namespace {

constexpr size_t kMaxQuoted = 80;
constexpr size_t kMaxClasses = 100000;

// "<file>:<line>: " at a position yaml-cpp knows (it counts lines from 0), "<file>: " otherwise.
std::string at_mark(const fs::path& yaml, const YAML::Mark& mark) {
  return printable_path(yaml) + (mark.is_null() ? "" : ":" + std::to_string(mark.line + 1)) + ": ";
}

std::string where(const fs::path& yaml, const YAML::Node& node) {
  return at_mark(yaml, node.Mark());
}

std::string scalar_text(const fs::path& yaml, const YAML::Node& node, const std::string& key) {
  if (!node.IsScalar() || node.Scalar().empty())
    throw UsageError(where(yaml, node) + "'" + key + "' must be a non-empty string");
  return node.Scalar();
}

// A split key: one path or a list of paths, each relative to the root unless absolute.
std::vector<fs::path> split_paths(const fs::path& yaml, const YAML::Node& node, const std::string& key,
                                  const fs::path& root) {
  std::vector<fs::path> paths;
  if (!node) return paths;
  if (node.IsSequence()) {
    if (node.size() == 0) throw UsageError(where(yaml, node) + "'" + key + "' is an empty list");
    for (const YAML::Node& item : node) paths.push_back(root / scalar_text(yaml, item, key));
  } else {
    paths.push_back(root / scalar_text(yaml, node, key));
  }
  for (fs::path& p : paths) p = p.lexically_normal();
  return paths;
}

int class_count(const fs::path& yaml, const YAML::Node& node) {
  long long count = -1;
  try {
    count = node.as<long long>();
  } catch (const YAML::Exception&) {
  }
  if (count < 1 || count > static_cast<long long>(kMaxClasses))
    throw UsageError(where(yaml, node) + "'nc' must be an integer from 1 to " + std::to_string(kMaxClasses));
  return int(count);
}

std::vector<std::string> class_names(const fs::path& yaml, const YAML::Node& node) {
  std::vector<std::string> names;
  if (node.IsSequence()) {
    for (const YAML::Node& item : node) names.push_back(scalar_text(yaml, item, "names"));
  } else if (node.IsMap()) {
    std::map<long long, std::string> by_id;
    for (const auto& entry : node) {
      long long id = -1;
      try {
        id = entry.first.as<long long>();
      } catch (const YAML::Exception&) {
      }
      if (id < 0 || id >= static_cast<long long>(node.size()))
        throw UsageError(where(yaml, entry.first) + "class id '" +
                         printable(entry.first.Scalar(), kMaxQuoted) +
                         "' of 'names' must be an integer from 0 to " + std::to_string(node.size() - 1));
      by_id[id] = scalar_text(yaml, entry.second, "names");
    }
    for (auto& [id, name] : by_id) names.push_back(std::move(name));
  } else {
    throw UsageError(where(yaml, node) + "'names' must be a list or a mapping of class id to name");
  }
  if (names.empty()) throw UsageError(where(yaml, node) + "'names' is empty");
  if (names.size() > kMaxClasses)
    throw UsageError(where(yaml, node) + "'names' has more than " + std::to_string(kMaxClasses) + " classes");
  return names;
}

}  // namespace

DataConfig read_data_yaml(const fs::path& yaml) {
  const std::string text = read_input_file(yaml, "dataset YAML");
  YAML::Node doc;
  try {
    doc = YAML::Load(text);
  } catch (const YAML::Exception& e) {
    throw UsageError(at_mark(yaml, e.mark) + "not valid YAML (" + printable(e.msg, kMaxQuoted) + ")");
  }
  if (!doc.IsMap())
    throw UsageError(printable_path(yaml) + ": expected a mapping with path, train, val, names");
  try {
    DataConfig config;
    config.yaml = yaml;
    const fs::path folder = yaml.has_parent_path() ? yaml.parent_path() : fs::path(".");
    config.root = doc["path"] ? folder / scalar_text(yaml, doc["path"], "path") : folder;
    config.root = fs::absolute(config.root).lexically_normal();  // as Ultralytics resolves it
    config.train = split_paths(yaml, doc["train"], "train", config.root);
    config.val = split_paths(yaml, doc["val"], "val", config.root);
    const YAML::Node names = doc["names"], nc = doc["nc"];
    if (names) {
      config.names = class_names(yaml, names);
      if (nc && class_count(yaml, nc) != int(config.names.size()))
        throw UsageError(where(yaml, nc) + "'nc' is " + nc.Scalar() + " but 'names' has " +
                         std::to_string(config.names.size()) + " classes");
    } else if (nc) {
      for (int i = 0; i < class_count(yaml, nc); ++i) config.names.push_back("class" + std::to_string(i));
    } else {
      throw UsageError(printable_path(yaml) + ": needs 'names' (or 'nc')");
    }
    return config;
  } catch (const YAML::Exception& e) {
    throw UsageError(at_mark(yaml, e.mark) + printable(e.msg, kMaxQuoted));
  }
}

const std::vector<fs::path>& split_sources(const DataConfig& config, const std::string& split) {
  const std::vector<fs::path>& sources = split == "train" ? config.train : config.val;
  if (sources.empty()) throw UsageError(printable_path(config.yaml) + ": no '" + split + "' split");
  return sources;
}

}  // namespace lab::dataset
