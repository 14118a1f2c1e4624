// Leftovers of writers that were killed (`kill -9`, power loss): temporary files and folders whose names
// carry the writer's pid. Used by the atomic output writer, the compile cache and the cpu backend's build
// folders.
#pragma once
#include <chrono>
#include <filesystem>
#include <string>

namespace lab {

// A temporary is stale when all of these hold: its name matches its writer's pattern (which captures the
// pid), it has the expected type (never a symlink), no process with that pid exists on this machine, and it
// was last modified at least kStaleTemporaryAge ago (so a live writer on another machine sharing the folder,
// whose pid means nothing here, keeps its file while it writes).
constexpr std::chrono::seconds kStaleTemporaryAge{60};

// Removes the stale temporaries in `folder` whose whole name matches the regular expression `pattern` (group
// 1 = the pid) and of type `type`; each folder and pattern once per process, so a folder of many outputs is
// scanned once. Never throws.
void remove_stale_temporaries(const std::filesystem::path& folder, const std::string& pattern,
                              std::filesystem::file_type type);

}  // namespace lab
