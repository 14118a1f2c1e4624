// The tree of kernel sources (.cu / .cuh): embedded in the binary at build time, or an editable directory
// (--kernels-dir / LAB_KERNELS_DIR). Project headers are included by tree-relative path ("common/lab.cuh").
#pragma once
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace lab {

class KernelTree {
 public:
  // The sources compiled into this binary.
  static std::shared_ptr<KernelTree> embedded();
  // An editable directory; throws UsageError when it does not exist.
  static std::shared_ptr<KernelTree> from_directory(const std::filesystem::path& dir);
  // `override_dir` if non-empty, else $LAB_KERNELS_DIR if set, else embedded().
  static std::shared_ptr<KernelTree> select(const std::string& override_dir);

  bool exists(const std::string& rel) const;
  // Throws UsageError naming the file when missing.
  std::string read(const std::string& rel) const;
  std::vector<std::string> list() const;  // every file, tree-relative, sorted
  // Project headers a file includes, transitively, each once, tree-relative, in first-seen order.
  std::vector<std::string> includes_of(const std::string& rel) const;
  // "embedded" or the directory.
  std::string description() const;
  const std::optional<std::filesystem::path>& directory() const { return dir_; }

 private:
  std::optional<std::filesystem::path> dir_;
  std::map<std::string, std::string> files_;  // embedded content (empty for directories)
};

// Quoted includes in a source text, as written (`#include "x"`), in order.
std::vector<std::string> quoted_includes(const std::string& text);

}  // namespace lab
