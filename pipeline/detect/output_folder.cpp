// Output folder naming and stale-label clean-up.
#include "pipeline/detect/output_folder.hpp"

#include <vector>

#include "nvrtc_runtime/errors.hpp"

namespace lab {

namespace fs = std::filesystem;

fs::path claim_output_folder(const fs::path& parent, const std::string& name, bool exist_ok) {
  std::error_code ec;
  fs::create_directories(parent, ec);
  if (ec) throw UsageError(parent.string() + ": cannot create the folder (" + ec.message() + ")");
  for (int n = 1;; ++n) {
    const fs::path folder = parent / (n == 1 ? name : name + std::to_string(n));
    if (exist_ok) {
      fs::create_directories(folder, ec);
      if (ec || !fs::is_directory(folder))
        throw UsageError(folder.string() + ": cannot create the folder (" +
                         (ec ? ec.message() : "not a directory") + ")");
      return folder;
    }
    if (fs::create_directory(folder, ec)) return folder;  // false (or EEXIST) when taken: the next number
    if (ec && ec != std::errc::file_exists)
      throw UsageError(folder.string() + ": cannot create the folder (" + ec.message() + ")");
  }
}

size_t remove_stale_labels(const fs::path& labels_dir, const std::set<std::string>& written) {
  std::error_code ec;
  if (!fs::is_directory(labels_dir, ec)) return 0;
  std::vector<fs::path> stale;
  for (const auto& entry : fs::directory_iterator(labels_dir, ec))
    if (entry.path().extension() == ".txt" && !written.count(entry.path().filename().string()))
      stale.push_back(entry.path());
  size_t removed = 0;
  for (const fs::path& p : stale) removed += fs::remove(p, ec) ? 1 : 0;
  if (fs::is_empty(labels_dir, ec)) fs::remove(labels_dir, ec);
  return removed;
}

}  // namespace lab
