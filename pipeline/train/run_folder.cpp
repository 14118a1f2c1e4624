// Run folders (run_folder.hpp).
#include "pipeline/train/run_folder.hpp"

#include <system_error>

#include "nvrtc_runtime/errors.hpp"
#include "nvrtc_runtime/printable_text.hpp"

namespace fs = std::filesystem;

namespace lab::train {

fs::path make_run_folder(const fs::path& project, const std::string& name, bool exist_ok) {
  fs::path folder = project / name;
  for (int n = 2; !exist_ok && fs::exists(folder); ++n) folder = project / (name + std::to_string(n));
  std::error_code error;
  fs::create_directories(folder / "weights", error);
  if (error)
    throw UsageError(printable_path(folder) + ": cannot create the run folder (" + error.message() + ")");
  return folder;
}

fs::path last_state_path(const fs::path& run_folder) {
  return run_folder / "weights" / "last_state.safetensors";
}

fs::path resume_state_path(const std::string& path, const fs::path& project) {
  if (!path.empty()) {
    const fs::path state = fs::is_directory(path) ? last_state_path(path) : fs::path(path);
    if (!fs::is_regular_file(state))
      throw UsageError("--resume " + printable(path) + ": no training state at " + printable_path(state));
    return state;
  }
  fs::path newest;
  fs::file_time_type newest_time;
  std::error_code error;
  if (fs::is_directory(project, error))
    for (const fs::directory_entry& run : fs::directory_iterator(project, error)) {
      const fs::path state = last_state_path(run.path());
      if (!fs::is_regular_file(state, error)) continue;
      const fs::file_time_type time = fs::last_write_time(state, error);
      if (!error && (newest.empty() || time > newest_time)) newest = state, newest_time = time;
    }
  if (newest.empty())
    throw UsageError("--resume: no run under " + printable_path(project) + " to resume (pass its folder)");
  return newest;
}

}  // namespace lab::train
