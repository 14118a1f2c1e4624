// Kernel workspace selection, per-user copy of the embedded tree, and file read/write.
#include "viewer/kernel_workspace.hpp"

#include <cstdlib>
#include <fstream>
#include <optional>
#include <sstream>

#include "nvrtc_runtime/errors.hpp"

namespace lab::viewer {

namespace fs = std::filesystem;

namespace {

bool is_kernel_tree(const fs::path& dir) {
  std::error_code ec;
  return fs::is_regular_file(dir / "common" / "lab.cuh", ec);
}

// The checkout's kernels/ when the current folder is the checkout or a folder inside it (a build folder).
std::optional<fs::path> checkout_kernels_dir() {
  std::error_code ec;
  fs::path here = fs::current_path(ec);
  if (ec) return std::nullopt;
  for (int depth = 0; depth < 3 && !here.empty(); ++depth) {
    if (is_kernel_tree(here / "kernels") && fs::exists(here / "CMakeLists.txt", ec)) return here / "kernels";
    if (here == here.parent_path()) break;
    here = here.parent_path();
  }
  return std::nullopt;
}

fs::path user_data_dir() {
  if (const char* xdg = std::getenv("XDG_DATA_HOME"); xdg && *xdg) return fs::path(xdg) / "yolo26-lab";
  if (const char* home = std::getenv("HOME"); home && *home)
    return fs::path(home) / ".local/share/yolo26-lab";
  return fs::temp_directory_path() / "yolo26-lab";
}

// Copies every embedded file that the user copy does not have yet (edits already there are kept).
fs::path user_copy_of_embedded_tree() {
  const fs::path dir = user_data_dir() / "kernels";
  const auto embedded = KernelTree::embedded();
  for (const std::string& rel : embedded->list()) {
    const fs::path target = dir / rel;
    std::error_code ec;
    if (fs::exists(target, ec)) continue;
    fs::create_directories(target.parent_path(), ec);
    std::ofstream out(target, std::ios::binary);
    out << embedded->read(rel);
    if (!out) throw UsageError("cannot write the kernel copy '" + target.string() + "'");
  }
  return dir;
}

}  // namespace

KernelWorkspace open_workspace(const std::string& kernels_dir, const std::string& cache_dir) {
  KernelWorkspace ws;
  if (!kernels_dir.empty()) {
    ws.dir = kernels_dir;
    ws.origin = "--kernels-dir";
  } else if (const char* env = std::getenv("LAB_KERNELS_DIR"); env && *env) {
    ws.dir = env;
    ws.origin = "$LAB_KERNELS_DIR";
  } else if (auto checkout = checkout_kernels_dir()) {
    ws.dir = *checkout;
    ws.origin = "checkout";
  } else {
    ws.dir = user_copy_of_embedded_tree();
    ws.origin = "user copy";
  }
  ws.context.tree = KernelTree::from_directory(ws.dir);
  ws.dir = *ws.context.tree->directory();
  ws.cache_dir = cache_dir;
  ws.context.cache =
      std::make_shared<DiskCache>(cache_dir.empty() ? DiskCache::from_environment() : DiskCache(cache_dir));
  return ws;
}

std::string read_tree_file(const KernelWorkspace& ws, const std::string& rel) {
  return ws.context.tree->read(rel);
}

void write_tree_file(const KernelWorkspace& ws, const std::string& rel, const std::string& text) {
  const fs::path target = ws.dir / rel;
  const fs::path temp = target.string() + ".viewer-tmp";
  {
    std::ofstream out(temp, std::ios::binary | std::ios::trunc);
    out << text;
    if (!out) throw UsageError("cannot write '" + temp.string() + "'");
  }
  std::error_code ec;
  fs::rename(temp, target, ec);
  if (ec) throw UsageError("cannot replace '" + target.string() + "': " + ec.message());
}

}  // namespace lab::viewer
