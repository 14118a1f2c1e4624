// Writes a zip archive of stored (uncompressed) members laid out as torch.save lays out its `.pt` files: each
// member's data starts on a 64-byte boundary of the file (the local header's extra field pads it, with the
// header id "FB" torch uses), CRC-32 per member, a central directory, no zip64 (every member and the archive
// stay under 4 GiB, fewer than 65,535 members).
#pragma once
#include <cstdint>
#include <filesystem>
#include <span>
#include <string>
#include <vector>

namespace lab {

constexpr uint64_t kZipDataAlignment = 64;  // torch's kFieldAlignment

struct ZipMember {
  std::string name;
  std::span<const uint8_t> bytes;
};

// Writes `path` (not atomically: callers write a temporary through write_file_atomically). UsageError
// "<path>: ..." when the archive would need zip64 or the file cannot be written.
void write_stored_zip(const std::filesystem::path& path, const std::vector<ZipMember>& members);

}  // namespace lab
