// The editable kernel tree the viewer edits, saves into and compiles from, and the runtime context over it.
// Choice of folder: --kernels-dir, else $LAB_KERNELS_DIR, else the checkout's kernels/ when the viewer is
// started from inside the checkout, else a per-user copy of the sources embedded in the binary.
#pragma once
#include <filesystem>
#include <string>

#include "nvrtc_runtime/runtime_context.hpp"

namespace lab::viewer {

struct KernelWorkspace {
  std::filesystem::path dir;  // the editable tree
  std::string origin;         // "--kernels-dir", "$LAB_KERNELS_DIR", "checkout", "user copy"
  std::string cache_dir;      // empty: the default cache
  RuntimeContext context;     // tree = dir
};

// Throws UsageError when a given folder does not exist.
KernelWorkspace open_workspace(const std::string& kernels_dir, const std::string& cache_dir);

// A file of the tree (tree-relative path), as text.
std::string read_tree_file(const KernelWorkspace& ws, const std::string& rel);
// Replaces the file through a temporary and a rename; throws UsageError naming the file on failure.
void write_tree_file(const KernelWorkspace& ws, const std::string& rel, const std::string& text);

}  // namespace lab::viewer
