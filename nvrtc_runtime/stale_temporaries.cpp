// Stale temporaries: the writer's pid no longer exists here and the file or folder is old enough.
#include "nvrtc_runtime/stale_temporaries.hpp"

#include <cerrno>
#include <csignal>
#include <mutex>
#include <regex>
#include <set>
#include <string>
#include <utility>

namespace lab {

namespace fs = std::filesystem;
namespace {

bool process_exists(long pid) {
  return pid > 0 && pid <= 0x3fffffff && (::kill(pid_t(pid), 0) == 0 || errno == EPERM);
}

// True the first time this folder is seen with this pattern in this process.
bool first_visit(const fs::path& folder, const std::string& pattern) {
  static std::mutex mutex;
  static std::set<std::pair<fs::path, std::string>> visited;
  std::error_code ec;
  const fs::path key = fs::weakly_canonical(folder, ec);
  std::lock_guard<std::mutex> lock(mutex);
  return visited.insert({key, pattern}).second;
}

}  // namespace

void remove_stale_temporaries(const fs::path& folder, const std::string& pattern, fs::file_type type) {
  if (!first_visit(folder, pattern)) return;
  const std::regex ours(pattern);
  const auto now = fs::file_time_type::clock::now();
  std::error_code ec;
  for (fs::directory_iterator it(folder, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    std::smatch match;
    if (!std::regex_match(name, match, ours) || match.size() < 2 || match[1].length() > 9) continue;
    std::error_code entry_ec;
    if (it->symlink_status(entry_ec).type() != type) continue;
    if (process_exists(std::stol(match[1]))) continue;
    const auto modified = fs::last_write_time(it->path(), entry_ec);
    if (entry_ec || now - modified < kStaleTemporaryAge) continue;
    fs::remove_all(it->path(), entry_ec);
  }
}

}  // namespace lab
