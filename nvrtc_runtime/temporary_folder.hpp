// A private folder under the system temp directory (mkdtemp), removed with everything in it when the owner
// goes. The cpu backend builds each module in one, so nothing another process does to the cache (clear,
// edits) reaches a compile in progress; the viewer gives one to each child process for its result and log.
#pragma once
#include <filesystem>
#include <string>

namespace lab {

class TemporaryFolder {
 public:
  // "<temp>/<prefix>-<pid>-XXXXXX"; throws RuntimeError naming the folder when it cannot be made. Folders of
  // the same prefix left by killed processes are removed first (stale_temporaries.hpp), once per process.
  explicit TemporaryFolder(const std::string& prefix);
  ~TemporaryFolder();
  TemporaryFolder(const TemporaryFolder&) = delete;
  TemporaryFolder& operator=(const TemporaryFolder&) = delete;
  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
};

}  // namespace lab
