// Regular-file reads for inputs (see input_file.hpp).
#include "nvrtc_runtime/input_file.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "nvrtc_runtime/errors.hpp"
#include "nvrtc_runtime/printable_text.hpp"

namespace lab {
namespace {

[[noreturn]] void refuse(const std::filesystem::path& path, const std::string& what,
                         const std::string& reason) {
  throw UsageError(printable_path(path) + ": cannot read " + what + " (" + reason + ")");
}

std::filesystem::file_type type_of(mode_t mode) {
  using T = std::filesystem::file_type;
  if (S_ISDIR(mode)) return T::directory;
  if (S_ISFIFO(mode)) return T::fifo;
  if (S_ISCHR(mode)) return T::character;
  if (S_ISBLK(mode)) return T::block;
  if (S_ISSOCK(mode)) return T::socket;
  return T::unknown;
}

std::string errno_reason(int error) {
  if (error == ENOENT) return "no such file";
  if (error == ELOOP) return "a symlink loop";
  return std::strerror(error);
}

// Closes the descriptor on every path out.
class InputFile {
 public:
  InputFile(const std::filesystem::path& path, const std::string& what) : path_(path), what_(what) {
    // O_NONBLOCK: opening a FIFO with no writer returns at once instead of waiting for one.
    fd_ = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd_ < 0) refuse(path_, what_, errno_reason(errno));
    struct stat info {};
    if (::fstat(fd_, &info) != 0) fail(errno_reason(errno));
    if (!S_ISREG(info.st_mode)) fail(not_a_file(type_of(info.st_mode)));
    size_ = static_cast<size_t>(info.st_size);
  }
  ~InputFile() { ::close(fd_); }
  InputFile(const InputFile&) = delete;
  InputFile& operator=(const InputFile&) = delete;

  std::string read(size_t max_bytes) {
    std::string bytes;
    bytes.reserve(std::min(size_, max_bytes));
    char buffer[1 << 16];
    while (bytes.size() < max_bytes) {
      const ssize_t got = ::read(fd_, buffer, std::min(sizeof buffer, max_bytes - bytes.size()));
      if (got == 0) break;
      if (got > 0)
        bytes.append(buffer, static_cast<size_t>(got));
      else if (errno != EINTR)
        fail("read error: " + std::string(std::strerror(errno)));
    }
    return bytes;
  }

 private:
  [[noreturn]] void fail(const std::string& reason) {
    ::close(fd_);
    fd_ = -1;
    refuse(path_, what_, reason);
  }

  const std::filesystem::path& path_;
  const std::string& what_;
  int fd_ = -1;
  size_t size_ = 0;
};

}  // namespace

std::string not_a_file(std::filesystem::file_type type, const std::string& expected) {
  using T = std::filesystem::file_type;
  switch (type) {
    case T::directory:
      return "a folder, not " + expected;
    case T::fifo:
      return "a FIFO, not " + expected;
    case T::character:
    case T::block:
      return "a device, not " + expected;
    case T::socket:
      return "a socket, not " + expected;
    case T::symlink:
      return "a symbolic link, not " + expected;
    default:
      return "not " + expected;
  }
}

std::string read_input_file(const std::filesystem::path& path, const std::string& what) {
  return InputFile(path, what).read(std::string::npos);
}

std::string read_input_prefix(const std::filesystem::path& path, size_t max_bytes, const std::string& what) {
  return InputFile(path, what).read(max_bytes);
}

}  // namespace lab
