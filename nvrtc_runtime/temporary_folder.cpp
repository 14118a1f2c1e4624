// TemporaryFolder: mkdtemp (the pid in the name), remove_all at the end, stale ones of killed processes
// removed.
#include "nvrtc_runtime/temporary_folder.hpp"

#include <cerrno>
#include <cstdlib>
#include <system_error>

#include <unistd.h>

#include "nvrtc_runtime/errors.hpp"
#include "nvrtc_runtime/stale_temporaries.hpp"

namespace lab {

namespace fs = std::filesystem;

TemporaryFolder::TemporaryFolder(const std::string& prefix) {
  std::error_code ec;
  const fs::path base = fs::temp_directory_path(ec);
  const fs::path parent = ec ? fs::path("/tmp") : base;
  // Folders named as below, left by killed processes.
  remove_stale_temporaries(parent, prefix + "-([0-9]+)-[A-Za-z0-9]{6}", fs::file_type::directory);
  std::string pattern = (parent / (prefix + "-" + std::to_string(::getpid()) + "-XXXXXX")).string();
  if (!::mkdtemp(pattern.data()))
    throw RuntimeError("cannot make a temporary folder " + pattern + ": " +
                       std::generic_category().message(errno));
  path_ = pattern;
}

TemporaryFolder::~TemporaryFolder() {
  std::error_code ignored;
  fs::remove_all(path_, ignored);
}

}  // namespace lab
