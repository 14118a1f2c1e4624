// Writing a file so that readers never see a partial one: the content goes to a temporary file beside the
// target, which is renamed over it only when complete. Used by every output the pipeline and `lab` write.
#pragma once
#include <filesystem>
#include <functional>
#include <string>

namespace lab {

// Calls `write(temporary)`, then renames the temporary to `path`. On any failure the temporary is removed and
// the error names `path`: a UsageError "<path>: cannot write the file (...)" for I/O failures, or the
// writer's own UsageError with the temporary's name replaced by `path`.
void write_file_atomically(const std::filesystem::path& path,
                           const std::function<void(const std::filesystem::path& temporary)>& write);

// The same for a whole in-memory content.
void write_file_atomically(const std::filesystem::path& path, const std::string& content);

}  // namespace lab
