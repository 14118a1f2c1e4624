// Model lookup and the download into the user cache (libcurl).
#include "pipeline/detect/model_locator.hpp"

#include <cstdio>
#include <cstdlib>
#include <unistd.h>

#include <curl/curl.h>

#include "nvrtc_runtime/errors.hpp"
#include "nvrtc_runtime/input_file.hpp"
#include "pipeline/checkpoint/checkpoint.hpp"

namespace lab {
namespace {

constexpr const char* kModelFile = "yolo26n.pt";

std::string env_or_empty(const char* name) {
  const char* value = std::getenv(name);
  return value ? value : "";
}

bool is_file(const std::filesystem::path& path) {
  std::error_code ec;
  return !path.empty() && std::filesystem::is_regular_file(path, ec);
}

// "" for a regular file, else why `path` is not one: "no such file", "is a folder, not a checkpoint file"
// (a FIFO, a device, ...: not_a_file), or the system's reason (a symlink loop).
std::string why_not_a_file(const std::filesystem::path& path) {
  std::error_code ec;
  const std::filesystem::file_status status = std::filesystem::status(path, ec);
  if (status.type() == std::filesystem::file_type::not_found) return "no such file";
  if (ec) return ec.message();
  if (status.type() == std::filesystem::file_type::regular) return "";
  return "is " + not_a_file(status.type(), "a checkpoint file");
}

std::filesystem::path user_cache_file() {
  std::filesystem::path base = env_or_empty("XDG_CACHE_HOME");
  if (base.empty()) {
    const std::string home = env_or_empty("HOME");
    base = home.empty() ? std::filesystem::temp_directory_path() : std::filesystem::path(home) / ".cache";
  }
  return base / "yolo26-kernel-lab" / kModelFile;
}

std::filesystem::path executable_dir() {
  std::error_code ec;
  const std::filesystem::path exe = std::filesystem::read_symlink("/proc/self/exe", ec);
  return ec ? std::filesystem::path() : exe.parent_path();
}

struct TransferState {
  FILE* file = nullptr;
  bool show_progress = false;
  bool progress_shown = false;
};

size_t write_chunk(char* data, size_t size, size_t count, void* user) {
  auto* state = static_cast<TransferState*>(user);
  return std::fwrite(data, size, count, state->file) * size;
}

int show_progress(void* user, curl_off_t total, curl_off_t done, curl_off_t, curl_off_t) {
  auto* state = static_cast<TransferState*>(user);
  if (!state->show_progress || done == 0) return 0;
  const double mib = double(done) / (1 << 20);
  if (total > 0)
    std::fprintf(stderr, "\rdownloading %s: %.1f / %.1f MiB (%d%%)", kModelFile, mib,
                 double(total) / (1 << 20), int(100 * done / total));
  else
    std::fprintf(stderr, "\rdownloading %s: %.1f MiB", kModelFile, mib);
  state->progress_shown = true;
  return 0;
}

std::filesystem::path temporary_beside(const std::filesystem::path& path) {
  return path.parent_path() / ("." + path.filename().string() + ".part" + std::to_string(::getpid()));
}

}  // namespace

std::vector<std::filesystem::path> shared_assets_candidates() {
  std::vector<std::filesystem::path> dirs{LAB_DEFAULT_ASSETS_DIR};
  for (std::filesystem::path dir = executable_dir(); !dir.empty(); dir = dir.parent_path()) {
    dirs.push_back(dir / "shared" / "assets");
    if (dir == dir.parent_path()) break;
  }
  return dirs;
}

ModelSearch default_model_search(const std::string& explicit_path) {
  ModelSearch search;
  search.explicit_path = explicit_path;
  search.env_path = env_or_empty("LAB_MODEL");
  search.assets_dirs = shared_assets_candidates();
  search.cache_file = user_cache_file();
  if (const std::string url = env_or_empty("LAB_MODEL_URL"); !url.empty()) search.url = url;
  search.show_progress = ::isatty(STDERR_FILENO) != 0;
  return search;
}

void download_file(const std::string& url, const std::filesystem::path& destination, bool progress) {
  TransferState state;
  state.show_progress = progress;
  state.file = std::fopen(destination.c_str(), "wb");
  if (!state.file) throw RuntimeError(destination.string() + ": cannot create the download file");

  CURL* curl = curl_easy_init();
  if (!curl) {
    std::fclose(state.file);
    std::filesystem::remove(destination);
    throw RuntimeError("download of " + url + " failed: libcurl could not start");
  }
  char error[CURL_ERROR_SIZE] = "";
  curl_easy_setopt(curl, CURLOPT_URL, url.c_str());
  curl_easy_setopt(curl, CURLOPT_FOLLOWLOCATION, 1L);
  curl_easy_setopt(curl, CURLOPT_FAILONERROR, 1L);
  curl_easy_setopt(curl, CURLOPT_ERRORBUFFER, error);
  curl_easy_setopt(curl, CURLOPT_CONNECTTIMEOUT, 30L);
  curl_easy_setopt(curl, CURLOPT_LOW_SPEED_LIMIT, 1L);  // give up on a transfer stalled for a minute
  curl_easy_setopt(curl, CURLOPT_LOW_SPEED_TIME, 60L);
  curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, write_chunk);
  curl_easy_setopt(curl, CURLOPT_WRITEDATA, &state);
  curl_easy_setopt(curl, CURLOPT_NOPROGRESS, 0L);
  curl_easy_setopt(curl, CURLOPT_XFERINFOFUNCTION, show_progress);
  curl_easy_setopt(curl, CURLOPT_XFERINFODATA, &state);
  const CURLcode code = curl_easy_perform(curl);
  curl_easy_cleanup(curl);
  if (state.progress_shown) std::fprintf(stderr, "\n");
  const bool closed = std::fclose(state.file) == 0;
  if (code != CURLE_OK || !closed) {
    std::error_code ec;
    std::filesystem::remove(destination, ec);
    const std::string reason =
        code != CURLE_OK ? (error[0] ? error : curl_easy_strerror(code)) : "write error";
    throw RuntimeError("download of " + url + " failed: " + reason);
  }
}

ModelLocation locate_model(const ModelSearch& search) {
  if (!search.explicit_path.empty()) {
    if (const std::string why = why_not_a_file(search.explicit_path); !why.empty())
      throw UsageError("--model " + search.explicit_path + ": " + why);
    return {search.explicit_path, "--model"};
  }
  if (!search.env_path.empty()) {
    if (const std::string why = why_not_a_file(search.env_path); !why.empty())
      throw UsageError("$LAB_MODEL=" + search.env_path + ": " + why);
    return {search.env_path, "$LAB_MODEL"};
  }
  for (const std::filesystem::path& dir : search.assets_dirs)
    if (is_file(dir / "models" / kModelFile)) return {dir / "models" / kModelFile, "shared assets"};
  if (is_file(search.cache_file)) return {search.cache_file, "user cache"};

  std::error_code ec;
  std::filesystem::create_directories(search.cache_file.parent_path(), ec);
  if (ec)
    throw RuntimeError(search.cache_file.parent_path().string() + ": cannot create the model cache (" +
                       ec.message() + ")");
  const std::filesystem::path temp = temporary_beside(search.cache_file);
  download_file(search.url, temp, search.show_progress);
  try {
    load_checkpoint(temp);
  } catch (const std::exception& e) {
    std::filesystem::remove(temp, ec);
    throw RuntimeError("download of " + search.url + " is not a valid checkpoint (" + e.what() + ")");
  }
  std::filesystem::rename(temp, search.cache_file, ec);
  if (ec) {
    std::filesystem::remove(temp, ec);
    throw RuntimeError(search.cache_file.string() + ": cannot store the downloaded model");
  }
  return {search.cache_file, "downloaded from " + search.url};
}

}  // namespace lab
