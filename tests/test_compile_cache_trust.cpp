// A compile cache that trusts nothing on disk but its checksummed entries: what the cpu backend compiles is
// the content its key names (an edit landing mid-compile, tampered files in the cache folder, a `lab cache
// clear` racing a compile change nothing), `cache clear` reports what it could not remove, and an unwritable
// cache folder costs only the caching (one warning).
#include <catch2/catch.hpp>

#include <algorithm>
#include <chrono>
#include <cstdlib>

#include <unistd.h>

#include "nvrtc_runtime/errors.hpp"
#include "nvrtc_runtime/stale_temporaries.hpp"
#include "nvrtc_runtime/temporary_folder.hpp"
#include "tests/test_emulator_support.hpp"

using namespace lab;
namespace fs = std::filesystem;
using test::contains;
using test::quoted;

namespace {

const char* kFillKernel = "extern \"C\" __global__ void fill(float* x) { x[threadIdx.x] = 1.0f; }\n";

// Sets LAB_HOST_CXX to a script that runs `before_compile` (not for `--version`), then the real `c++`;
// restores the environment when it goes. The cpu backend reads LAB_HOST_CXX when it is made.
struct HostCompilerHook {
  HostCompilerHook(const fs::path& folder, const std::string& before_compile) {
    const fs::path script = folder / "cxx-hook.sh";
    test::write_file(script, "#!/bin/sh\ncase \"$1\" in --version) ;; *) " + before_compile +
                                 " ;; esac\nexec c++ \"$@\"\n");
    fs::permissions(script, fs::perms::owner_all);
    ::setenv("LAB_HOST_CXX", script.c_str(), 1);
  }
  ~HostCompilerHook() { ::unsetenv("LAB_HOST_CXX"); }
};

// Compiles fill.cu of `tree` on the cpu backend with `cache_dir` and returns what the kernel wrote.
float run_fill(std::shared_ptr<KernelTree> tree, const fs::path& cache_dir) {
  auto backend = make_backend("cpu", test::make_context(std::move(tree), cache_dir));
  auto module = backend->compile({"fill.cu", {}, {"fill"}});
  DeviceBuffer out = test::poisoned_floats(*backend, 1);
  void* out_ptr = out.get();
  backend->launch(module->kernel("fill"), {{1, 1, 1}, {1, 1, 1}}, kernel_args(out_ptr));
  backend->synchronize();
  return backend->download_vector<float>(out, 1)[0];
}

void make_old(const fs::path& path) {
  fs::last_write_time(path, fs::file_time_type::clock::now() - kStaleTemporaryAge - std::chrono::minutes(1));
}

size_t count_entries(const fs::path& cache_dir) {
  size_t n = 0;
  for (const auto& e : fs::directory_iterator(cache_dir)) n += e.path().extension() == ".entry";
  return n;
}

}  // namespace

TEST_CASE("cpu backend: an edit landing during the compile never gets cached under the old content's key",
          "[runtime][emulator]") {
  test::ScratchDir dir("cache-edit-race");
  const fs::path source = dir.path / "k" / "fill.cu";
  test::write_file(source, kFillKernel);
  const fs::path marker = dir.path / "edit-once";
  test::write_file(marker, "");
  // The "compiler" first edits the kernel (1.0f -> 2.0f) as a user saving mid-compile would, once.
  HostCompilerHook hook(dir.path, "if [ -e " + quoted(marker.string()) + " ]; then rm " +
                                      quoted(marker.string()) + "; sed -i s/1.0f/2.0f/ " +
                                      quoted(source.string()) + "; fi");
  auto tree = KernelTree::from_directory(dir.path / "k");
  // What was compiled is the content the key was made from: the source as it was when the compile started.
  CHECK(run_fill(tree, dir.path / "cache") == 1.0f);
  // Back to that content: the cache hit must give that content's result.
  test::write_file(source, kFillKernel);
  CHECK(run_fill(tree, dir.path / "cache") == 1.0f);
  // And the edited content is its own entry, compiled from itself.
  test::write_file(source,
                   std::string(kFillKernel).replace(std::string(kFillKernel).find("1.0f"), 4, "2.0f"));
  CHECK(run_fill(tree, dir.path / "cache") == 2.0f);
}

TEST_CASE("cpu backend: tampered files in the cache folder never reach a compile", "[runtime][emulator]") {
  test::ScratchDir dir("cache-tamper");
  test::write_file(dir.path / "k" / "fill.cu", kFillKernel);
  auto tree = KernelTree::from_directory(dir.path / "k");
  const fs::path cache_dir = dir.path / "cache";
  REQUIRE(run_fill(tree, cache_dir) == 1.0f);
  // Break every file the cache folder holds besides its checksummed entries (copies of emulator headers or
  // kernel sources, shared objects, ...) and drop the entries so the next run compiles again.
  for (const auto& e : fs::recursive_directory_iterator(cache_dir)) {
    if (!e.is_regular_file()) continue;
    if (e.path().extension() == ".entry")
      fs::remove(e.path());
    else
      test::write_file(e.path(), "#error tampered copy\n");
  }
  CHECK(run_fill(tree, cache_dir) == 1.0f);
  CHECK(count_entries(cache_dir) == 1);
}

TEST_CASE("cpu backend: a `lab cache clear` during a compile does not break it", "[runtime][emulator]") {
  test::ScratchDir dir("cache-clear-race");
  test::write_file(dir.path / "k" / "fill.cu", kFillKernel);
  const fs::path cache_dir = dir.path / "cache";
  // The real `lab cache clear` of this cache, run by the "compiler" while the compile is under way.
  HostCompilerHook hook(dir.path, quoted(LAB_BINARY) + " cache clear --cache-dir " +
                                      quoted(cache_dir.string()) + " >/dev/null");
  CHECK(run_fill(KernelTree::from_directory(dir.path / "k"), cache_dir) == 1.0f);
}

TEST_CASE("an unwritable cache folder compiles without caching, with one warning", "[runtime][cli]") {
  // Run as root here, a read-only folder would still be writable; a cache path under a regular file cannot be
  // created by anyone, so it stands for every unwritable cache.
  test::ScratchDir dir("cache-unwritable");
  test::write_file(dir.path / "file", "not a folder");
  const std::string cache = " --cache-dir " + quoted((dir.path / "file" / "cache").string());
  for (const char* command : {"run detect_decode --backend cpu --param B=2", "source detect_decode --ptx"}) {
    INFO(command);
    const test::LabResult r = test::run_lab(command + cache);
    INFO(r.err);
    CHECK(r.exit_code == 0);
    CHECK(contains(r.err, "lab: warning: cache directory " + (dir.path / "file" / "cache").string() +
                              " is not writable"));
    CHECK(std::count(r.err.begin(), r.err.end(), '\n') == 1);
  }
}

TEST_CASE("cache clear reports what it could not remove and exits 1", "[runtime][cli]") {
  test::ScratchDir dir("cache-clear-fail");
  const fs::path cache_dir = dir.path / "cache";
  DiskCache cache(cache_dir);
  CacheEntry entry;
  entry.parts["summary"] = "test";
  cache.store("stuck", entry);
  // Root ignores permissions, so for root an undeletable entry needs the immutable attribute (chattr +i, on
  // ext4/xfs/btrfs); for another user a cache folder without write permission does it.
  const fs::path stuck = cache.path_of("stuck");
  const bool root = ::geteuid() == 0;
  const std::string lock =
      root ? "chattr +i " + quoted(stuck.string()) : "chmod a-w " + quoted(cache_dir.string());
  const std::string unlock =
      root ? "chattr -i " + quoted(stuck.string()) : "chmod u+w " + quoted(cache_dir.string());
  if (std::system((lock + " 2>/dev/null").c_str()) != 0) {
    WARN("skipped: cannot make a file undeletable here (" << lock << ")");
    return;
  }
  const CacheClearReport report = cache.clear();
  const test::LabResult cli = test::run_lab("cache clear --cache-dir " + quoted(cache_dir.string()));
  REQUIRE(std::system(unlock.c_str()) == 0);
  REQUIRE(report.failures.size() == 1);
  CHECK(contains(report.failures[0], stuck.string() + " ("));
  CHECK(report.removed == 0);
  CHECK(cli.exit_code == 1);
  CHECK(cli.out == "removed 0 entries from " + cache_dir.string() + "\n");
  CHECK(cli.err == "lab: cache clear: could not remove 1 item(s): " + report.failures[0] + "\n");
}

TEST_CASE("stale cache temporaries and build folders of killed processes are removed, live ones kept",
          "[runtime]") {
  test::ScratchDir dir("cache-stale");
  const pid_t gone = test::dead_pid();
  const std::string live = std::to_string(::getppid());
  // Cache stores: ".tmp-<key>-<pid>-<n>" in the cache folder, cleaned by the next store.
  const fs::path stale_store = dir.path / "cache" / (".tmp-abc123-" + std::to_string(gone) + "-7");
  const fs::path live_store = dir.path / "cache" / (".tmp-abc123-" + live + "-8");
  test::write_file(stale_store, "partial");
  test::write_file(live_store, "partial");
  make_old(stale_store);
  make_old(live_store);
  DiskCache(dir.path / "cache").store("k", CacheEntry{});
  CHECK_FALSE(fs::exists(stale_store));
  CHECK(fs::exists(live_store));
  // Build folders: "<prefix>-<pid>-XXXXXX" in the temp folder, cleaned by the next one of that prefix (a
  // prefix of this test's own, since each prefix is cleaned once per process).
  const std::string prefix = "lab-test-stale-" + std::to_string(::getpid());
  const fs::path stale_folder = fs::temp_directory_path() / (prefix + "-" + std::to_string(gone) + "-aB3dE9");
  const fs::path live_folder = fs::temp_directory_path() / (prefix + "-" + live + "-aB3dE9");
  test::write_file(stale_folder / "kernel.so", "partial");
  test::write_file(live_folder / "kernel.so", "partial");
  make_old(stale_folder);
  make_old(live_folder);
  {
    TemporaryFolder next(prefix);
    CHECK(contains(next.path().filename().string(), prefix + "-" + std::to_string(::getpid()) + "-"));
  }
  CHECK_FALSE(fs::exists(stale_folder));
  CHECK(fs::exists(live_folder));
  fs::remove_all(live_folder);
}
