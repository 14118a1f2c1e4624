// Read-only access to a zip archive through libzip: list the members, read one member fully. Every libzip
// failure (not a zip, truncated, bad CRC, missing member, a size that cannot be true) becomes a UsageError
// naming the file and, where there is one, the member.
#pragma once
#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

struct zip;

namespace lab {

class ZipArchive {
 public:
  // Opens the archive (with libzip's consistency checks); UsageError "<file>: not a valid zip archive (...)".
  static ZipArchive open(const std::filesystem::path& path);

  const std::filesystem::path& path() const { return path_; }
  const std::vector<std::string>& member_names() const { return names_; }
  bool contains(const std::string& member) const;
  // The member's uncompressed bytes; UsageError when it is missing, its size is implausible for this archive
  // or the data cannot be read back intact.
  std::vector<uint8_t> read(const std::string& member) const;

 private:
  struct Closer {
    void operator()(zip* archive) const;
  };
  std::filesystem::path path_;
  std::unique_ptr<zip, Closer> archive_;
  std::vector<std::string> names_;
  uint64_t file_bytes_ = 0;
};

}  // namespace lab
