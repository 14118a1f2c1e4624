// libzip wrapper: open with consistency checks, member listing, bounded full reads with size verification.
#include "pipeline/checkpoint/zip_archive.hpp"

#include <algorithm>

#include <zip.h>

#include "nvrtc_runtime/errors.hpp"

namespace lab {
namespace {

// A deflated member cannot expand more than ~1032x; anything claiming more is corrupt.
constexpr uint64_t kMaxDeflateRatio = 1100;
constexpr uint64_t kMaxMemberBytes = uint64_t{16} << 30;
constexpr uint64_t kReadChunk = uint64_t{1} << 20;

std::string libzip_message(int code) {
  zip_error_t error;
  zip_error_init_with_code(&error, code);
  std::string text = zip_error_strerror(&error);
  zip_error_fini(&error);
  return text;
}

}  // namespace

void ZipArchive::Closer::operator()(zip* archive) const {
  zip_discard(archive);
}

ZipArchive ZipArchive::open(const std::filesystem::path& path) {
  std::error_code ec;
  const uint64_t bytes = std::filesystem::file_size(path, ec);
  if (ec) throw UsageError(path.string() + ": cannot open the file (" + ec.message() + ")");
  int code = 0;
  zip* handle = zip_open(path.c_str(), ZIP_RDONLY | ZIP_CHECKCONS, &code);
  if (handle == nullptr)
    throw UsageError(path.string() + ": not a valid zip archive (" + libzip_message(code) + ")");
  ZipArchive archive;
  archive.path_ = path;
  archive.archive_.reset(handle);
  archive.file_bytes_ = bytes;
  const zip_int64_t count = zip_get_num_entries(handle, 0);
  for (zip_int64_t i = 0; i < count; ++i) {
    const char* name = zip_get_name(handle, static_cast<zip_uint64_t>(i), ZIP_FL_ENC_RAW);
    if (name == nullptr)
      throw UsageError(path.string() + ": zip entry " + std::to_string(i) + " has no readable name");
    archive.names_.emplace_back(name);
  }
  return archive;
}

bool ZipArchive::contains(const std::string& member) const {
  return std::find(names_.begin(), names_.end(), member) != names_.end();
}

std::vector<uint8_t> ZipArchive::read(const std::string& member) const {
  const std::string at = path_.string() + ": member '" + member + "': ";
  zip* handle = archive_.get();
  const zip_int64_t index = zip_name_locate(handle, member.c_str(), ZIP_FL_ENC_RAW);
  if (index < 0) throw UsageError(path_.string() + ": missing archive member '" + member + "'");
  zip_stat_t stat;
  zip_stat_init(&stat);
  if (zip_stat_index(handle, static_cast<zip_uint64_t>(index), 0, &stat) != 0 ||
      !(stat.valid & ZIP_STAT_SIZE) || !(stat.valid & ZIP_STAT_COMP_SIZE) ||
      !(stat.valid & ZIP_STAT_COMP_METHOD))
    throw UsageError(at + "cannot read its directory entry (" + zip_strerror(handle) + ")");
  const uint64_t limit = stat.comp_method == ZIP_CM_STORE
                             ? file_bytes_
                             : std::min(kMaxMemberBytes, stat.comp_size * kMaxDeflateRatio + 1024);
  if (stat.size > limit || (stat.comp_method == ZIP_CM_STORE && stat.comp_size != stat.size))
    throw UsageError(at + "claims " + std::to_string(stat.size) + " bytes, impossible in a " +
                     std::to_string(file_bytes_) + "-byte archive");

  zip_file_t* file = zip_fopen_index(handle, static_cast<zip_uint64_t>(index), 0);
  if (file == nullptr) throw UsageError(at + "cannot open it (" + zip_strerror(handle) + ")");
  std::vector<uint8_t> bytes;
  std::string failure;
  // Grow with the data actually read, so a lying size never allocates more than the archive delivers.
  while (failure.empty() && bytes.size() < stat.size) {
    const uint64_t chunk = std::min<uint64_t>(kReadChunk, stat.size - bytes.size());
    const size_t old_size = bytes.size();
    bytes.resize(old_size + chunk);
    const zip_int64_t got = zip_fread(file, bytes.data() + old_size, chunk);
    if (got < 0) {
      failure = zip_error_strerror(zip_file_get_error(file));
    } else {
      bytes.resize(old_size + static_cast<size_t>(got));
      if (got == 0) failure = "the data ends after " + std::to_string(bytes.size()) + " bytes";
    }
  }
  if (failure.empty()) {
    // Reading one byte past the declared size lets libzip verify the CRC of stored members.
    uint8_t extra = 0;
    const zip_int64_t got = zip_fread(file, &extra, 1);
    if (got < 0) failure = zip_error_strerror(zip_file_get_error(file));
    if (got > 0) failure = "more data than its declared " + std::to_string(stat.size) + " bytes";
  }
  const int close_code = zip_fclose(file);
  if (failure.empty() && close_code != 0) failure = libzip_message(close_code);
  if (!failure.empty()) throw UsageError(at + "cannot be read intact (" + failure + ")");
  return bytes;
}

}  // namespace lab
