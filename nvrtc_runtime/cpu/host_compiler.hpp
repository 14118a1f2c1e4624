// Building a kernel module for the cpu backend: the kernel .cu plus the emulator headers, compiled by the
// host C++ compiler into a shared object, cached in the same content-addressed cache as NVRTC output.
#pragma once
#include <filesystem>
#include <string>
#include <vector>

#include "nvrtc_runtime/compile_types.hpp"
#include "nvrtc_runtime/disk_cache.hpp"
#include "nvrtc_runtime/kernel_tree.hpp"

namespace lab::cpu {

class HostCompiler {
 public:
  // $LAB_HOST_CXX (split on spaces, e.g. "ccache g++-13") or `c++`; runs `--version` once.
  static HostCompiler from_environment();
  const std::vector<std::string>& command() const { return command_; }
  const std::string& version() const { return version_; }  // the whole `--version` output
  std::string version_line() const;                        // its first line

 private:
  std::vector<std::string> command_;
  std::string version_;
};

// The generated translation unit: emulator header, the kernel source, one exported entry per name expression.
std::string wrapper_source(const CompileRequest& request);

// Compiler flags for a request (without output and input paths); `tree_root` and `emulator_dir` are the
// build's private copies of the kernel sources and emulator headers.
std::vector<std::string> host_compile_flags(const CompileRequest& request,
                                            const std::filesystem::path& tree_root,
                                            const std::filesystem::path& emulator_dir);

// The host compile of `request` as a --verbose line shows it (the private folder's copies named by what they
// hold).
std::string host_compile_command_line(const HostCompiler& compiler, const CompileRequest& request);

// Compiles (or loads from `cache`, through cached_compile) the module of `request`: binary = the shared object's
// bytes. The compile runs in a private folder holding the exact bytes of the source and its headers that the
// cache key hashes, so neither an edit of the cache's files nor a concurrent `lab cache clear` reaches it. An
// unwritable cache only costs the caching (see DiskCache::store). Throws CompileError (diagnostics with
// tree-relative paths) when the host compiler rejects the source. `note` receives cache notes for --verbose.
CompileResult build_kernel_module(const KernelTree& tree, const DiskCache& cache, const CompileRequest& request,
                                  const HostCompiler& compiler, std::string* note = nullptr);

// Writes the shared object of `result` into `folder` for dlopen (which keeps its mapping once the file goes).
std::filesystem::path write_shared_object(const CompileResult& result, const std::filesystem::path& folder);

}  // namespace lab::cpu
