// The atomic output writer (pipeline/atomic_file.hpp): what an output path may be (a FIFO, socket-like or
// directory path refused and left as it was, a symlink written through with the link kept, a character device
// written through in place; tested on a node of our own, never /dev/null), fsync of the file before the
// rename and of the folder after it (seen with strace), and the removal of stale temporaries of killed
// writers, never of a live writer's.
#include <catch2/catch.hpp>

#include <chrono>
#include <cstdlib>
#include <sstream>

#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "tests/checkpoint_test_support.hpp"
#include "nvrtc_runtime/errors.hpp"
#include "nvrtc_runtime/stale_temporaries.hpp"
#include "pipeline/atomic_file.hpp"
#include "tests/test_helpers.hpp"

namespace fs = std::filesystem;
using lab::test::contains;
using lab::test::quoted;

namespace {

std::string refusal(const fs::path& path) {
  try {
    lab::write_file_atomically(path, std::string("new content"));
  } catch (const lab::UsageError& e) {
    return e.what();
  }
  return "(written)";
}

void age(const fs::path& file, std::chrono::seconds by) {
  fs::last_write_time(file, fs::file_time_type::clock::now() - by);
}

// Our own node of the null device (1, 3) in a scratch folder, never /dev/null itself: if the writer
// regressed, a scratch file would be replaced, not the machine's /dev/null. Empty when mknod is not allowed
// (it needs root).
fs::path null_device_in(const fs::path& folder) {
  const fs::path device = folder / "null";
  if (::mknod(device.c_str(), S_IFCHR | 0666, ::makedev(1, 3)) != 0) return {};
  return device;
}

}  // namespace

TEST_CASE("an output path that is a FIFO, a directory or a dangling link is refused and left as it was",
          "[atomic]") {
  lab::test::ScratchDir dir("atomic-refuse");
  const fs::path fifo = dir.path / "pipe";
  REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
  const std::string fifo_error = refusal(fifo);
  CHECK(fifo_error == fifo.string() + ": is a FIFO, not a regular file; refusing to replace it");
  CHECK(fs::is_fifo(fs::symlink_status(fifo)));

  const fs::path folder = dir.path / "folder";
  fs::create_directory(folder);
  CHECK(refusal(folder) == folder.string() + ": is a folder, not a regular file; refusing to replace it");
  CHECK(fs::is_directory(folder));

  const fs::path to_fifo = dir.path / "to-pipe";
  fs::create_symlink(fifo, to_fifo);
  CHECK(contains(refusal(to_fifo), "is a FIFO"));
  CHECK(fs::is_symlink(to_fifo));
  CHECK(fs::is_fifo(fs::symlink_status(fifo)));

  const fs::path dangling = dir.path / "dangling";
  fs::create_symlink(dir.path / "absent", dangling);
  CHECK(contains(refusal(dangling), dangling.string() + ": cannot write through the symbolic link"));
  CHECK(fs::is_symlink(fs::symlink_status(dangling)));
  CHECK_FALSE(fs::exists(dir.path / "absent"));
  // Nothing else was left in the folder: no temporaries.
  CHECK(std::distance(fs::directory_iterator(dir.path), fs::directory_iterator()) == 4);
}

TEST_CASE("a symlink output is written through: the target replaced atomically, the link kept", "[atomic]") {
  lab::test::ScratchDir dir("atomic-link");
  fs::create_directory(dir.path / "real");
  const fs::path target = dir.path / "real" / "out.bin";
  lab::test::write_file(target, "old");
  const fs::path link = dir.path / "out-link.bin";
  fs::create_symlink(target, link);
  lab::write_file_atomically(link, std::string("new content"));
  CHECK(fs::is_symlink(fs::symlink_status(link)));
  CHECK(fs::read_symlink(link) == target);
  CHECK(lab::test::read_text(target) == "new content");
  // The temporary was made beside the target (a rename cannot cross folders) and is gone.
  CHECK(std::distance(fs::directory_iterator(dir.path / "real"), fs::directory_iterator()) == 1);
}

TEST_CASE("a character device output is written through, never replaced", "[atomic]") {
  lab::test::ScratchDir dir("atomic-device");
  const fs::path device = null_device_in(dir.path);
  if (device.empty()) {
    WARN("skipped: cannot create a character device here (mknod needs root)");
    return;
  }
  lab::write_file_atomically(device, std::string(1 << 20, 'x'));
  CHECK(fs::is_character_file(fs::symlink_status(device)));
  CHECK(std::distance(fs::directory_iterator(dir.path), fs::directory_iterator()) == 1);
}

TEST_CASE(
    "lab convert to a FIFO exits 2 with one line and leaves the FIFO, to a null device it writes through",
    "[atomic][cli]") {
  const fs::path pt = lab::test::yolo26n_checkpoint();
  if (pt.empty()) {
    WARN("skipped: shared assets absent (" LAB_ASSETS_DIR ")");
    return;
  }
  lab::test::ScratchDir dir("atomic-cli");
  const fs::path fifo = dir.path / "pipe";
  REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
  const auto r = lab::test::run_lab("convert " + quoted(pt.string()) + " " + quoted(fifo.string()));
  CHECK(r.exit_code == 2);
  CHECK(r.err == "lab: " + fifo.string() + ": is a FIFO, not a regular file; refusing to replace it\n");
  CHECK(fs::is_fifo(fs::symlink_status(fifo)));
  const fs::path device = null_device_in(dir.path);
  if (device.empty()) return;  // mknod needs root
  const auto null = lab::test::run_lab("convert " + quoted(pt.string()) + " " + quoted(device.string()));
  CHECK(null.exit_code == 0);
  CHECK(fs::is_character_file(fs::symlink_status(device)));
}

TEST_CASE("an atomic write fsyncs the file before the rename and the folder after it", "[atomic][cli]") {
  const fs::path pt = lab::test::yolo26n_checkpoint();
  if (pt.empty() || std::system("strace -V >/dev/null 2>&1") != 0) {
    WARN("skipped: needs the shared assets and strace");
    return;
  }
  lab::test::ScratchDir dir("atomic-fsync");
  const fs::path out = dir.path / "out.safetensors";
  const fs::path trace = dir.path / "trace.txt";
  // -y prints the path of each descriptor, so the fsyncs can be told apart.
  const std::string command = "strace -f -qq -y -e signal=none -e trace=fsync,rename,renameat,renameat2 -o " +
                              quoted(trace.string()) + " " + quoted(LAB_BINARY) + " convert " +
                              quoted(pt.string()) + " " + quoted(out.string()) + " >/dev/null 2>&1";
  REQUIRE(std::system(command.c_str()) == 0);
  std::istringstream lines(lab::test::read_text(trace));
  int file_sync = -1, rename = -1, folder_sync = -1, n = 0;
  for (std::string line; std::getline(lines, line); ++n) {
    if (contains(line, "fsync(") && contains(line, ".out.safetensors.tmp-")) file_sync = n;
    if (contains(line, "rename") && contains(line, "\"" + out.string() + "\"")) rename = n;
    if (contains(line, "fsync(") && contains(line, "<" + dir.path.string() + ">")) folder_sync = n;
  }
  INFO(lab::test::read_text(trace));
  CHECK(file_sync >= 0);
  CHECK(file_sync < rename);
  CHECK(rename < folder_sync);
}

TEST_CASE("stale temporaries of killed writers are removed on the next write, a live writer's are not",
          "[atomic]") {
  lab::test::ScratchDir dir("atomic-stale");
  const auto old_enough = lab::kStaleTemporaryAge + std::chrono::seconds(60);
  const pid_t gone = lab::test::dead_pid();
  const pid_t live = ::getppid();
  auto temporary = [&](const std::string& name, pid_t pid) {
    const fs::path p = dir.path / ("." + name + ".tmp-" + std::to_string(pid) + "-12345");
    lab::test::write_file(p, "partial");
    return p;
  };
  const fs::path stale = temporary("model.safetensors", gone);
  age(stale, old_enough);
  const fs::path live_fresh = temporary("other.json", live);  // a writer at work right now
  const fs::path live_old = temporary("slow.json", live);     // a live writer that is slow
  age(live_old, old_enough);
  const fs::path gone_fresh = temporary("remote.json", gone);  // too recent to judge (another machine?)
  const fs::path not_ours = dir.path / ("notes.tmp-" + std::to_string(gone) + "-1");  // no leading dot
  lab::test::write_file(not_ours, "user file");
  age(not_ours, old_enough);

  lab::write_file_atomically(dir.path / "result.json", std::string("{}"));
  CHECK_FALSE(fs::exists(stale));
  CHECK(fs::exists(live_fresh));
  CHECK(fs::exists(live_old));
  CHECK(fs::exists(gone_fresh));
  CHECK(fs::exists(not_ours));
  CHECK(lab::test::read_text(dir.path / "result.json") == "{}");
}

TEST_CASE("a relative output path without a folder is written in the working folder", "[atomic]") {
  lab::test::ScratchDir dir("atomic-relative");
  const fs::path previous = fs::current_path();
  fs::current_path(dir.path);
  std::string outcome = "(written)";
  try {
    lab::write_file_atomically("plain.json", std::string("{}\n"));
  } catch (const lab::UsageError& e) {
    outcome = e.what();
  }
  fs::current_path(previous);
  CHECK(outcome == "(written)");
  CHECK(lab::test::read_text(dir.path / "plain.json") == "{}\n");
}
