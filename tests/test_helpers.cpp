// Test helpers: scratch directories and runtime contexts with private caches.
#include "test_helpers.hpp"

#include <random>

#include <unistd.h>

namespace lab::test {

namespace fs = std::filesystem;

ScratchDir::ScratchDir(const std::string& label) {
  std::random_device rd;
  path = fs::temp_directory_path() /
         ("lab-test-" + label + "-" + std::to_string(::getpid()) + "-" + std::to_string(rd()));
  fs::create_directories(path);
}

ScratchDir::~ScratchDir() {
  std::error_code ec;
  fs::remove_all(path, ec);
}

void write_file(const fs::path& p, const std::string& text) {
  fs::create_directories(p.parent_path());
  std::ofstream(p, std::ios::binary) << text;
}

RuntimeContext make_context(std::shared_ptr<KernelTree> tree, const fs::path& cache_dir, bool check_bounds) {
  RuntimeContext c;
  c.tree = std::move(tree);
  c.cache = std::make_shared<DiskCache>(cache_dir);
  c.options.check_bounds = check_bounds;
  return c;
}

RuntimeContext embedded_context() {
  // One cache per build tree: repeated test runs reuse compiled kernels, as users' runs do.
  static const fs::path cache = fs::temp_directory_path() / ("lab-test-cache-" + std::to_string(::getuid()));
  return make_context(KernelTree::embedded(), cache);
}

}  // namespace lab::test
