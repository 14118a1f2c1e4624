// Where a training run writes: PROJECT/NAME, or NAME2, NAME3 ... when it exists (Ultralytics'
// increment_path, unless exist_ok), and the run a bare `--resume` continues (the newest last state under
// PROJECT).
#pragma once
#include <filesystem>
#include <string>

namespace lab::train {

// Creates and returns the run's folder and its weights/ folder; UsageError naming the folder when it cannot.
std::filesystem::path make_run_folder(const std::filesystem::path& project, const std::string& name,
                                      bool exist_ok);

// The file of a run's training state (what --resume reads), inside its weights/ folder.
std::filesystem::path last_state_path(const std::filesystem::path& run_folder);

// `--resume PATH`: a run folder or its state file; empty: the most recently written state under `project`.
// UsageError when there is none.
std::filesystem::path resume_state_path(const std::string& path, const std::filesystem::path& project);

}  // namespace lab::train
