// Writing a file so that readers never see a partial one and nothing that is not a file is replaced: the
// content goes to a temporary file beside the target, which is fsynced and renamed over it only when complete
// (then the folder is fsynced). Used by every output the pipeline and `lab` write. Stale temporaries of killed
// writers in the folder written to are removed first, by the rule of nvrtc_runtime/stale_temporaries.hpp.
//
// What the output path may be:
// - absent or a regular file: written atomically as above;
// - a symlink: followed to its final target, which is treated by these same rules (the link is kept; a
//   dangling link or a loop is refused);
// - a character device (/dev/null): written through in place, never replaced (not atomic: it is no file);
// - a FIFO, socket, block device or directory: refused with "<path>: is a FIFO, not a regular file; refusing
//   to replace it" (a FIFO without a reader would block forever).
#pragma once
#include <filesystem>
#include <functional>
#include <string>

namespace lab {

// Calls `write(temporary)`, then renames the temporary to `path`. On any failure the temporary is removed and
// the error names `path`: a UsageError "<path>: cannot write the file (...)" for I/O failures, the refusal
// above, or the writer's own UsageError with the temporary's name replaced by `path`.
void write_file_atomically(const std::filesystem::path& path,
                           const std::function<void(const std::filesystem::path& temporary)>& write);

// The same for a whole in-memory content.
void write_file_atomically(const std::filesystem::path& path, const std::string& content);

}  // namespace lab
