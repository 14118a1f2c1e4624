// Input files are read only when they are regular files: opening a FIFO for reading blocks until a writer
// appears (a hang with no message), and a device or folder is not an input. Every verb that reads a named
// file (images, checkpoints, scenario TOML, label and heads files) reads it through here.
#pragma once
#include <cstddef>
#include <filesystem>
#include <string>

namespace lab {

// The whole file. It is opened without blocking and checked on the opened descriptor, so a FIFO, device,
// socket or folder (also one swapped in after an earlier check) is refused:
// UsageError "<path>: cannot read <what> (<reason>)", reasons such as "no such file", "a FIFO, not a regular
// file", "a symlink loop", "read error: ...".
std::string read_input_file(const std::filesystem::path& path, const std::string& what);
// The same for at most the first `max_bytes` bytes (fewer when the file is shorter).
std::string read_input_prefix(const std::filesystem::path& path, size_t max_bytes, const std::string& what);

// Why a path of this type is not the file expected, in the words every message here uses: "a FIFO, not a
// regular file", "a folder, not a checkpoint file" (also a device, a socket, a symbolic link), or "not a
// regular file" for a type with no name. The one namer of the input reader, output writer and model lookup.
std::string not_a_file(std::filesystem::file_type type, const std::string& expected = "a regular file");

}  // namespace lab
