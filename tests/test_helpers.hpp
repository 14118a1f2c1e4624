// Shared helpers of the test suite: a scratch directory per test, a runtime context over a chosen kernel
// tree, and the GPU guard that [gpu] tests call first.
#pragma once
#include <filesystem>
#include <fstream>
#include <string>

#include <sys/types.h>

#include "nvrtc_runtime/runtime_context.hpp"

namespace lab::test {

// A fresh empty directory under the system temp dir, removed at scope exit.
struct ScratchDir {
  explicit ScratchDir(const std::string& label);
  ~ScratchDir();
  std::filesystem::path path;
};

void write_file(const std::filesystem::path& p, const std::string& text);

// Context over `tree` with its own cache directory (so tests never touch the user's cache).
RuntimeContext make_context(std::shared_ptr<KernelTree> tree, const std::filesystem::path& cache_dir,
                            bool check_bounds = false);

// Context over the embedded kernels with a per-process test cache (shared by the tests of one run).
RuntimeContext embedded_context();

// The `lab` binary run as a user would: its exit code, standard output and standard error.
struct LabResult {
  int exit_code = -1;
  std::string out, err;
};

// Runs a /bin/sh command line (already quoted) and captures its exit code, standard output and error.
LabResult run_command(const std::string& command);

// Runs `lab ARGS` (ARGS already shell-quoted where needed) with the tests' compile cache and none of the
// user's LAB_KERNELS_DIR / LAB_SCENARIOS_DIR / LAB_MODEL / LAB_MODEL_URL.
LabResult run_lab(const std::string& args);
std::string quoted(const std::string& s);  // single-quoted for /bin/sh
std::string read_text(const std::filesystem::path& p);
bool contains(const std::string& text, const std::string& part);

// A pid that belonged to a process which has exited (a child forked and reaped), for stale-temporary tests.
pid_t dead_pid();

}  // namespace lab::test

// In a [gpu] test: print the skip marker and leave the test when there is no CUDA device. Catch2 2.x has no
// SKIP: the test passes inside lab_tests, and ctest, which matches LAB_GPU_SKIP_MARKER (tests/CMakeLists.txt),
// reports it as skipped.
#define LAB_REQUIRE_GPU_OR_SKIP()               \
  do {                                          \
    if (!lab::cuda_device_present()) {          \
      WARN(LAB_GPU_SKIP_MARKER);                \
      return;                                   \
    }                                           \
  } while (0)

// In a [multi_gpu] test: leave it where fewer than `n` GPUs exist, printing "skipped: needs n GPUs, found m",
// which ctest also reports as skipped (LAB_GPU_SKIP_REGEX in tests/CMakeLists.txt).
#define LAB_REQUIRE_GPUS_OR_SKIP(n)                                                  \
  do {                                                                               \
    LAB_REQUIRE_GPU_OR_SKIP();                                                       \
    if (lab::cuda_device_count() < (n)) {                                            \
      WARN("skipped: needs " << (n) << " GPUs, found " << lab::cuda_device_count()); \
      return;                                                                        \
    }                                                                                \
  } while (0)
