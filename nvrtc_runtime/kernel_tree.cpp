// KernelTree: embedded or on-disk kernel sources and include scanning.
#include "nvrtc_runtime/kernel_tree.hpp"

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <regex>
#include <set>
#include <sstream>

#include "nvrtc_runtime/errors.hpp"

namespace lab {

std::map<std::string, std::string> embedded_kernel_files();  // generated at build time

namespace fs = std::filesystem;

std::shared_ptr<KernelTree> KernelTree::embedded() {
  static std::shared_ptr<KernelTree> tree = [] {
    auto t = std::make_shared<KernelTree>();
    t->files_ = embedded_kernel_files();
    return t;
  }();
  return tree;
}

std::shared_ptr<KernelTree> KernelTree::from_directory(const fs::path& dir) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec))
    throw UsageError("kernels directory '" + dir.string() + "' does not exist or is not a directory");
  auto t = std::make_shared<KernelTree>();
  t->dir_ = fs::canonical(dir);
  return t;
}

std::shared_ptr<KernelTree> KernelTree::select(const std::string& override_dir) {
  if (!override_dir.empty()) return from_directory(override_dir);
  if (const char* env = std::getenv("LAB_KERNELS_DIR"); env && *env) return from_directory(env);
  return embedded();
}

bool KernelTree::exists(const std::string& rel) const {
  if (dir_) {
    std::error_code ec;
    return fs::is_regular_file(*dir_ / rel, ec);
  }
  return files_.count(rel) > 0;
}

std::string KernelTree::read(const std::string& rel) const {
  if (dir_) {
    std::ifstream in(*dir_ / rel, std::ios::binary);
    if (!in) throw UsageError("kernel source '" + (*dir_ / rel).string() + "' not found");
    std::ostringstream s;
    s << in.rdbuf();
    return s.str();
  }
  auto it = files_.find(rel);
  if (it == files_.end()) throw UsageError("kernel source '" + rel + "' is not in the embedded kernel tree");
  return it->second;
}

std::vector<std::string> KernelTree::list() const {
  std::vector<std::string> out;
  if (dir_) {
    for (auto& e : fs::recursive_directory_iterator(*dir_)) {
      auto ext = e.path().extension();
      if (e.is_regular_file() && (ext == ".cu" || ext == ".cuh"))
        out.push_back(fs::relative(e.path(), *dir_).generic_string());
    }
  } else {
    for (auto& [k, v] : files_) out.push_back(k);
  }
  std::sort(out.begin(), out.end());
  return out;
}

std::vector<std::string> quoted_includes(const std::string& text) {
  static const std::regex include_re(R"re(^\s*#\s*include\s*"([^"]+)")re");
  std::vector<std::string> out;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    std::smatch m;
    if (std::regex_search(line, m, include_re)) out.push_back(m[1]);
  }
  return out;
}

std::vector<std::string> KernelTree::includes_of(const std::string& rel) const {
  std::vector<std::string> order;
  std::set<std::string> seen{rel};
  std::vector<std::string> stack{rel};
  while (!stack.empty()) {
    std::string file = stack.back();
    stack.pop_back();
    std::string parent = fs::path(file).parent_path().generic_string();
    for (const std::string& inc : quoted_includes(read(file))) {
      std::string candidate = inc;
      if (!exists(candidate) && !parent.empty())
        candidate = (fs::path(parent) / inc).lexically_normal().generic_string();
      if (!exists(candidate)) continue;  // not a project header (the compiler reports it if truly missing)
      if (seen.insert(candidate).second) {
        order.push_back(candidate);
        stack.push_back(candidate);
      }
    }
  }
  return order;
}

std::string KernelTree::description() const {
  return dir_ ? dir_->string() : std::string("embedded");
}

}  // namespace lab
