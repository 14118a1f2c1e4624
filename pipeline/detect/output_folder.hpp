// The output folder of `lab detect`, named as `yolo predict` names it: runs/detect/predict, then predict2,
// predict3, ... (each created atomically, so two runs never share one) or NAME itself with --exist-ok; and
// the clean-up that keeps a reused folder's labels/ to the files of the latest run.
#pragma once
#include <filesystem>
#include <set>
#include <string>

namespace lab {

// Creates and returns `parent/name`, or with `exist_ok` reuses it; otherwise the first of `name2`,
// `name3`, ... that does not exist yet. UsageError naming the folder when it cannot be created.
std::filesystem::path claim_output_folder(const std::filesystem::path& parent, const std::string& name,
                                          bool exist_ok);

// Removes the label files (*.txt) of `labels_dir` whose names are not in `written` (an earlier run's, for
// images this run did not label), then the folder itself if that leaves it empty. Returns how many went.
size_t remove_stale_labels(const std::filesystem::path& labels_dir, const std::set<std::string>& written);

}  // namespace lab
