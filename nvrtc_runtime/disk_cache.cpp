// DiskCache: entry file = magic, named parts (name, length, bytes), then the SHA-256 of everything before it.
#include "disk_cache.hpp"

#include <cstdlib>
#include <fstream>
#include <random>
#include <sstream>

#include "sha256.hpp"

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
  std::random_device rd;
  fs::path tmp = root_ / (".tmp-" + key + "-" + std::to_string(rd()));
  {
    std::ofstream out(tmp, std::ios::binary);
    out << body << digest;
    if (!out) {
      if (note) *note = "cache directory " + root_.string() + " is not writable; result not cached";
      fs::remove(tmp, ec);
      return;
    }
  }
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
  for (auto& e : fs::directory_iterator(root_)) {
    if (!e.is_regular_file() || e.path().extension() != ".entry") continue;
    CacheEntryInfo info;
    info.key = e.path().stem().string();
    info.bytes = e.file_size();
    if (auto entry = load(info.key)) {
      auto it = entry->parts.find("summary");
      if (it != entry->parts.end()) info.summary = it->second;
    } else {
      info.summary = "(corrupt; removed)";
    }
    out.push_back(info);
  }
  return out;
}

size_t DiskCache::clear() const {
  // Everything under the root belongs to the cache: entries, and the cpu backend's trees and shared objects.
  size_t n = 0;
  std::error_code ec;
  if (!fs::is_directory(root_, ec)) return 0;
  for (auto& e : fs::directory_iterator(root_)) {
    if (e.is_regular_file() && e.path().extension() == ".entry") ++n;
    fs::remove_all(e.path(), ec);
  }
  return n;
}

}  // namespace lab
