// The zip records of APPNOTE.TXT (local file header, central directory header, end of central directory),
// written little-endian field by field, and the CRC-32 (polynomial 0xEDB88320) they carry.
#include "pipeline/checkpoint/zip_writer.hpp"

#include <array>
#include <fstream>
#include <limits>

#include "nvrtc_runtime/errors.hpp"

namespace lab {

namespace {

constexpr uint32_t kLocalHeader = 0x04034b50, kCentralHeader = 0x02014b50, kEndOfDirectory = 0x06054b50;
constexpr uint16_t kVersion = 20;            // 2.0: stored members, no zip64
constexpr uint16_t kDosDate = (1 << 5) | 1;  // 1980-01-01, time 00:00 (the zip epoch)
constexpr uint64_t kLocalHeaderBytes = 30, kPaddingHeaderBytes = 4;

uint32_t crc32(std::span<const uint8_t> bytes) {
  static const std::array<uint32_t, 256> table = [] {
    std::array<uint32_t, 256> t{};
    for (uint32_t i = 0; i < 256; ++i) {
      uint32_t c = i;
      for (int k = 0; k < 8; ++k) c = (c & 1) ? 0xEDB88320u ^ (c >> 1) : c >> 1;
      t[i] = c;
    }
    return t;
  }();
  uint32_t crc = 0xFFFFFFFFu;
  for (uint8_t b : bytes) crc = table[(crc ^ b) & 0xFF] ^ (crc >> 8);
  return crc ^ 0xFFFFFFFFu;
}

class RecordBytes {
 public:
  RecordBytes& u16(uint64_t value) { return le(value, 2); }
  RecordBytes& u32(uint64_t value) { return le(value, 4); }
  RecordBytes& text(const std::string& s) {
    bytes_.insert(bytes_.end(), s.begin(), s.end());
    return *this;
  }
  const std::vector<uint8_t>& bytes() const { return bytes_; }

 private:
  RecordBytes& le(uint64_t value, int width) {
    for (int i = 0; i < width; ++i) bytes_.push_back(static_cast<uint8_t>(value >> (8 * i)));
    return *this;
  }
  std::vector<uint8_t> bytes_;
};

struct Written {
  uint32_t crc = 0;
  uint64_t offset = 0;
};

}  // namespace

void write_stored_zip(const std::filesystem::path& path, const std::vector<ZipMember>& members) {
  const std::string file = path.string();
  constexpr uint64_t kLimit = std::numeric_limits<uint32_t>::max();
  if (members.size() >= 0xFFFF)
    throw UsageError(file + ": " + std::to_string(members.size()) +
                     " members need zip64, which is not written");
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out) throw UsageError(file + ": cannot open the file for writing");
  uint64_t offset = 0;
  auto emit = [&](std::span<const uint8_t> bytes) {
    out.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
    offset += bytes.size();
  };

  std::vector<Written> written;
  for (const ZipMember& member : members) {
    const Written record{crc32(member.bytes), offset};
    // Pad so that the data after the header, the name and the padding field starts on the alignment.
    const uint64_t unpadded = offset + kLocalHeaderBytes + member.name.size() + kPaddingHeaderBytes;
    const uint64_t padding = kZipDataAlignment - unpadded % kZipDataAlignment;
    if (member.bytes.size() > kLimit || unpadded + padding + member.bytes.size() > kLimit)
      throw UsageError(file + ": member '" + member.name + "' lies past 4 GiB, which needs zip64");
    RecordBytes header;
    header.u32(kLocalHeader).u16(kVersion).u16(0).u16(0).u16(0).u16(kDosDate).u32(record.crc);
    header.u32(member.bytes.size()).u32(member.bytes.size()).u16(member.name.size());
    header.u16(kPaddingHeaderBytes + padding).text(member.name).text("FB").u16(padding);
    header.text(std::string(padding, 'Z'));
    emit(header.bytes());
    emit(member.bytes);
    written.push_back(record);
  }

  const uint64_t directory = offset;
  for (size_t i = 0; i < members.size(); ++i) {
    RecordBytes entry;
    entry.u32(kCentralHeader).u16(kVersion).u16(kVersion).u16(0).u16(0).u16(0).u16(kDosDate);
    entry.u32(written[i].crc).u32(members[i].bytes.size()).u32(members[i].bytes.size());
    entry.u16(members[i].name.size()).u16(0).u16(0).u16(0).u16(0).u32(0).u32(written[i].offset);
    entry.text(members[i].name);
    emit(entry.bytes());
  }
  const uint64_t directory_bytes = offset - directory;
  if (offset > kLimit) throw UsageError(file + ": the archive passes 4 GiB, which needs zip64");
  RecordBytes end;
  end.u32(kEndOfDirectory).u16(0).u16(0).u16(members.size()).u16(members.size());
  end.u32(directory_bytes).u32(directory).u16(0);
  emit(end.bytes());
  out.flush();
  if (!out) throw UsageError(file + ": cannot write the file");
}

}  // namespace lab
