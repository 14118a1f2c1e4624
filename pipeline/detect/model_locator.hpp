// Finding the YOLO26 checkpoint: --model PATH, then $LAB_MODEL, then the shared assets folder beside the
// checkout (compiled in, or found above the executable for a moved build), then the user cache
// ($XDG_CACHE_HOME or ~/.cache)/yolo26-kernel-lab/yolo26n.pt, then a download of the official release
// ($LAB_MODEL_URL overrides the address) into that cache: written to a temporary file, checked by loading it
// as a checkpoint, and only then renamed into place, so the cache never holds a partial or corrupt model.
#pragma once
#include <filesystem>
#include <string>
#include <vector>

namespace lab {

inline constexpr const char* kOfficialModelUrl =
    "https://github.com/ultralytics/assets/releases/download/v8.4.0/yolo26n.pt";

struct ModelSearch {
  std::string explicit_path;                       // --model
  std::string env_path;                            // $LAB_MODEL
  std::vector<std::filesystem::path> assets_dirs;  // shared assets folders, in order
  std::filesystem::path cache_file;                // the user cache's yolo26n.pt
  std::string url = kOfficialModelUrl;             // $LAB_MODEL_URL or the official release
  bool show_progress = false;                      // download progress on stderr
};

struct ModelLocation {
  std::filesystem::path path;
  std::string origin;  // "--model", "$LAB_MODEL", "shared assets", "user cache", "downloaded from <url>"
};

// Shared assets folders to try: the compiled-in LAB_DEFAULT_ASSETS_DIR, then `shared/assets` in every folder
// above the executable.
std::vector<std::filesystem::path> shared_assets_candidates();

// The search as the environment and the build describe it; `show_progress` is set when stderr is a terminal.
ModelSearch default_model_search(const std::string& explicit_path);

// UsageError for an explicit path (--model / $LAB_MODEL) that is not a regular file, saying what it is (no
// such file, a directory, not a regular file such as a FIFO); RuntimeError when the download
// fails (HTTP error, network, truncated or corrupt file), naming the URL.
ModelLocation locate_model(const ModelSearch& search);

// Downloads `url` to `destination` (HTTP errors are failures); RuntimeError naming the URL on any failure,
// and then `destination` does not exist.
void download_file(const std::string& url, const std::filesystem::path& destination, bool show_progress);

}  // namespace lab
