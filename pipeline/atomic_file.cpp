// Atomic file writes: what the output path is (regular, absent, a symlink, a device, ...), a temporary file
// beside the target, fsync of the file before the rename and of its folder after it, and stale temporaries
// removed.
#include "pipeline/atomic_file.hpp"

#include <fstream>
#include <random>

#include <cerrno>
#include <fcntl.h>
#include <unistd.h>

#include "nvrtc_runtime/errors.hpp"
#include "nvrtc_runtime/input_file.hpp"
#include "nvrtc_runtime/stale_temporaries.hpp"

namespace lab {

namespace fs = std::filesystem;
namespace {

// Where the bytes go: the path itself or a symlink's final target; `write_through` for a character device,
// which is opened and written in place (never replaced).
struct Destination {
  fs::path path;
  bool write_through = false;
};

Destination destination_of(const fs::path& path) {
  std::error_code ec;
  const fs::file_status own = fs::symlink_status(path, ec);
  if (own.type() == fs::file_type::not_found) return {path};
  if (ec) throw UsageError(path.string() + ": cannot write the file (" + ec.message() + ")");
  fs::path resolved = path;
  if (fs::is_symlink(own)) {
    resolved = fs::canonical(path, ec);
    if (ec)
      throw UsageError(path.string() + ": cannot write through the symbolic link (" + ec.message() + ")");
  }
  const fs::file_status target = fs::status(resolved, ec);
  if (fs::is_regular_file(target)) return {resolved};
  if (fs::is_character_file(target)) return {resolved, true};
  throw UsageError(path.string() + ": is " + not_a_file(target.type()) + "; refusing to replace it");
}

// fsync of a file or folder by path (a second descriptor flushes the same inode).
void sync_path(const fs::path& path, int flags) {
  const int fd = ::open(path.c_str(), flags | O_CLOEXEC);
  if (fd < 0 || ::fsync(fd) != 0) {
    const std::error_code ec(errno, std::generic_category());
    if (fd >= 0) ::close(fd);
    throw fs::filesystem_error("fsync", path, ec);
  }
  ::close(fd);
}

}  // namespace

void write_file_atomically(const fs::path& path,
                           const std::function<void(const fs::path& temporary)>& write) {
  const fs::path parent = path.has_parent_path() ? path.parent_path() : ".";
  if (!fs::is_directory(parent))
    throw UsageError(path.string() + ": cannot write the file (folder '" + parent.string() +
                     "' does not exist)");
  const Destination destination = destination_of(path);
  if (destination.write_through) {
    try {
      write(destination.path);
    } catch (const fs::filesystem_error& e) {
      throw UsageError(path.string() + ": cannot write the file (" + e.code().message() + ")");
    }
    return;
  }
  // "out.json" has no parent: its folder is the working one (an empty path cannot be opened to fsync).
  const fs::path folder = destination.path.has_parent_path() ? destination.path.parent_path() : fs::path(".");
  // Temporaries named as below, left by killed writers.
  remove_stale_temporaries(folder, R"(\..+\.tmp-([0-9]+)-[0-9]+)", fs::file_type::regular);
  std::random_device entropy;
  const fs::path temporary = folder / ("." + destination.path.filename().string() + ".tmp-" +
                                       std::to_string(::getpid()) + "-" + std::to_string(entropy()));
  auto remove_temporary = [&temporary] {
    std::error_code ignored;
    fs::remove(temporary, ignored);
  };
  try {
    write(temporary);
    sync_path(temporary, O_RDONLY);  // the content reaches the disk before the name does
    fs::rename(temporary, destination.path);
    sync_path(folder, O_RDONLY | O_DIRECTORY);  // and the rename itself
  } catch (const fs::filesystem_error& e) {
    remove_temporary();
    throw UsageError(path.string() + ": cannot write the file (" + e.code().message() + ")");
  } catch (const UsageError& e) {
    remove_temporary();
    std::string message = e.what();  // name the file the user asked for, not the temporary
    const std::string temporary_name = temporary.string();
    if (message.rfind(temporary_name, 0) == 0)
      message = path.string() + message.substr(temporary_name.size());
    throw UsageError(message);
  } catch (...) {
    remove_temporary();
    throw;
  }
}

void write_file_atomically(const fs::path& path, const std::string& content) {
  write_file_atomically(path, [&](const fs::path& temporary) {
    std::ofstream out(temporary, std::ios::binary | std::ios::trunc);
    out.write(content.data(), std::streamsize(content.size()));
    out.close();
    if (!out) throw UsageError(path.string() + ": cannot write the file");
  });
}

}  // namespace lab
