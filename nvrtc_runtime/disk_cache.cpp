// DiskCache: entry file = magic, named parts (name, length, bytes), then the SHA-256 of everything before it.
#include "nvrtc_runtime/disk_cache.hpp"

#include <cstdlib>
#include <fstream>
#include <iostream>
#include <mutex>
#include <random>
#include <set>
#include <sstream>

#include <unistd.h>

#include "nvrtc_runtime/sha256.hpp"
#include "nvrtc_runtime/stale_temporaries.hpp"

namespace lab {

namespace fs = std::filesystem;
namespace {

constexpr std::string_view kMagic = "LABCACHE1\n";
constexpr size_t kDigestChars = 64;

std::string read_file(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

// Parses a verified body into parts; false when the structure is inconsistent.
bool parse_parts(std::string_view body, CacheEntry& entry) {
  size_t pos = kMagic.size();
  while (pos < body.size()) {
    size_t nl = body.find('\n', pos);
    if (nl == std::string_view::npos) return false;
    std::string name(body.substr(pos, nl - pos));
    size_t nl2 = body.find('\n', nl + 1);
    if (nl2 == std::string_view::npos) return false;
    size_t len = 0;
    try {
      len = std::stoull(std::string(body.substr(nl + 1, nl2 - nl - 1)));
    } catch (...) {
      return false;
    }
    if (nl2 + 1 + len > body.size()) return false;
    entry.parts[name] = std::string(body.substr(nl2 + 1, len));
    pos = nl2 + 1 + len;
  }
  return pos == body.size();
}

// One warning per cache folder and process, on stderr whatever the verbosity: every compile still works,
// uncached.
void warn_unwritable_once(const fs::path& root, const std::string& why) {
  static std::mutex mutex;
  static std::set<fs::path> warned;
  std::lock_guard<std::mutex> lock(mutex);
  if (warned.insert(root).second)
    std::cerr << "lab: warning: cache directory " << root.string() << " is not writable (" << why
              << "); compiling without caching\n";
}

}  // namespace

DiskCache::DiskCache(fs::path root) : root_(std::move(root)) {}

DiskCache DiskCache::from_environment() {
  if (const char* d = std::getenv("LAB_CACHE_DIR"); d && *d) return DiskCache(d);
  if (const char* x = std::getenv("XDG_CACHE_HOME"); x && *x) return DiskCache(fs::path(x) / "yolo26-lab");
  if (const char* h = std::getenv("HOME"); h && *h) return DiskCache(fs::path(h) / ".cache" / "yolo26-lab");
  return DiskCache(fs::temp_directory_path() / "yolo26-lab-cache");
}

fs::path DiskCache::path_of(const std::string& key) const {
  return root_ / (key + ".entry");
}

std::optional<CacheEntry> DiskCache::load(const std::string& key, std::string* note) const {
  fs::path p = path_of(key);
  std::error_code ec;
  if (!fs::is_regular_file(p, ec)) return std::nullopt;
  std::string data = read_file(p);
  auto corrupt = [&](const char* why) -> std::optional<CacheEntry> {
    if (note) *note = "corrupt cache entry " + p.string() + " (" + why + "): removed, recompiling";
    fs::remove(p, ec);
    return std::nullopt;
  };
  if (data.size() < kMagic.size() + kDigestChars || data.compare(0, kMagic.size(), kMagic) != 0)
    return corrupt("bad header or truncated");
  std::string_view body(data.data(), data.size() - kDigestChars);
  if (sha256_hex(body) != data.substr(data.size() - kDigestChars)) return corrupt("checksum mismatch");
  CacheEntry entry;
  if (!parse_parts(body, entry)) return corrupt("inconsistent structure");
  return entry;
}

void DiskCache::store(const std::string& key, const CacheEntry& entry, std::string* note) const {
  std::string body(kMagic);
  for (auto& [name, bytes] : entry.parts) body += name + "\n" + std::to_string(bytes.size()) + "\n" + bytes;
  std::string digest = sha256_hex(body);
  std::error_code ec;
  fs::create_directories(root_, ec);
  // Temporaries named as below, left by killed writers.
  remove_stale_temporaries(root_, R"(\.tmp-[0-9a-f]+-([0-9]+)-[0-9]+)", fs::file_type::regular);
  std::random_device rd;
  fs::path tmp = root_ / (".tmp-" + key + "-" + std::to_string(::getpid()) + "-" + std::to_string(rd()));
  {
    std::ofstream out(tmp, std::ios::binary);
    out << body << digest;
    if (!out) {
      const std::string why = ec ? ec.message() : std::string("cannot create files there");
      warn_unwritable_once(root_, why);
      if (note)
        *note = "cache directory " + root_.string() + " is not writable (" + why + "); result not cached";
      fs::remove(tmp, ec);
      return;
    }
  }
  // The rename fails when a concurrent `lab cache clear` removed the temporary: the result is just not
  // cached.
  fs::rename(tmp, path_of(key), ec);
  if (ec) {
    if (note) *note = "could not store cache entry " + path_of(key).string() + ": " + ec.message();
    fs::remove(tmp, ec);
  }
}

std::vector<CacheEntryInfo> DiskCache::list() const {
  std::vector<CacheEntryInfo> out;
  std::error_code ec;
  if (!fs::is_directory(root_, ec)) return out;
  for (fs::directory_iterator it(root_, ec), end; !ec && it != end; it.increment(ec)) {
    const fs::directory_entry& e = *it;
    if (!e.is_regular_file() || e.path().extension() != ".entry") continue;
    CacheEntryInfo info;
    info.key = e.path().stem().string();
    info.bytes = e.file_size();
    if (auto entry = load(info.key)) {
      auto summary = entry->parts.find("summary");
      if (summary != entry->parts.end()) info.summary = summary->second;
    } else {
      info.summary = "(corrupt; removed)";
    }
    out.push_back(info);
  }
  return out;
}

CacheClearReport DiskCache::clear() const {
  // Everything under the root belongs to the cache: entries and the temporaries of stores in progress (whose
  // rename then fails harmlessly). Compiles never read from the cache folder while compiling.
  CacheClearReport report;
  std::error_code ec;
  const fs::file_status status = fs::status(root_, ec);
  if (status.type() == fs::file_type::not_found) return report;
  if (!fs::is_directory(status)) {
    report.failures.push_back(root_.string() + " (" + (ec ? ec.message() : "not a directory") + ")");
    return report;
  }
  fs::directory_iterator it(root_, ec);
  if (ec) report.failures.push_back(root_.string() + " (" + ec.message() + ")");
  for (const fs::directory_iterator end; !ec && it != end; it.increment(ec)) {
    const fs::path path = it->path();
    const bool is_entry = path.extension() == ".entry";
    std::error_code removal;
    fs::remove_all(path, removal);
    if (removal)
      report.failures.push_back(path.string() + " (" + removal.message() + ")");
    else if (is_entry)
      ++report.removed;
  }
  return report;
}

}  // namespace lab
