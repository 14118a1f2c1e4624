// TemporaryFolder: mkdtemp, and remove_all at the end.
#include "temporary_folder.hpp"

#include <cerrno>
#include <cstdlib>
#include <system_error>

#include "errors.hpp"

namespace lab {

namespace fs = std::filesystem;

TemporaryFolder::TemporaryFolder(const std::string& prefix) {
  std::error_code ec;
  const fs::path base = fs::temp_directory_path(ec);
  std::string pattern = ((ec ? fs::path("/tmp") : base) / (prefix + "-XXXXXX")).string();
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
