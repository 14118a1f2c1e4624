// Content-addressed compile cache: one file per key, written atomically, verified by a SHA-256 trailer.
// A truncated or corrupt entry is never loaded: it is removed and the caller recompiles.
#pragma once
#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace lab {

struct CacheEntry {
  std::map<std::string, std::string> parts;  // e.g. "cubin", "ptx", "log", "meta" (bytes in std::string)
};

struct CacheEntryInfo {
  std::string key;
  uint64_t bytes = 0;
  std::string summary;  // the "summary" part if present (backend, source, target)
};

struct CacheClearReport {
  size_t removed = 0;                 // entries removed
  std::vector<std::string> failures;  // "<path> (<reason>)" for everything that could not be removed
};

class DiskCache {
 public:
  explicit DiskCache(std::filesystem::path root);
  // $LAB_CACHE_DIR, else $XDG_CACHE_HOME/yolo26-lab, else ~/.cache/yolo26-lab.
  static DiskCache from_environment();

  const std::filesystem::path& root() const { return root_; }
  // nullopt on miss or on a corrupt entry (which is deleted; `note` receives a one-line explanation).
  std::optional<CacheEntry> load(const std::string& key, std::string* note = nullptr) const;
  // Atomic: write to a temporary file in the same directory, then rename. Failures to write are not errors
  // (an unwritable cache only costs recompiles): `note` explains, and an unwritable folder is warned about
  // once per process on stderr ("lab: warning: cache directory ... is not writable (...); compiling without
  // caching").
  void store(const std::string& key, const CacheEntry& entry, std::string* note = nullptr) const;
  std::vector<CacheEntryInfo> list() const;
  // Removes everything under the root; what could not be removed is listed in the report.
  CacheClearReport clear() const;
  std::filesystem::path path_of(const std::string& key) const;

 private:
  std::filesystem::path root_;
};

}  // namespace lab
