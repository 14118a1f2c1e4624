// Atomic file writes: temporary file beside the target, then rename.
#include "pipeline/atomic_file.hpp"

#include <fstream>
#include <random>

#include <unistd.h>

#include "nvrtc_runtime/errors.hpp"

namespace lab {

void write_file_atomically(const std::filesystem::path& path,
                           const std::function<void(const std::filesystem::path& temporary)>& write) {
  const std::filesystem::path parent = path.has_parent_path() ? path.parent_path() : ".";
  if (!std::filesystem::is_directory(parent))
    throw UsageError(path.string() + ": cannot write the file (folder '" + parent.string() +
                     "' does not exist)");
  std::random_device entropy;
  const std::filesystem::path temporary =
      parent / ("." + path.filename().string() + ".tmp-" + std::to_string(::getpid()) + "-" +
                std::to_string(entropy()));
  auto remove_temporary = [&temporary] {
    std::error_code ignored;
    std::filesystem::remove(temporary, ignored);
  };
  try {
    write(temporary);
    std::filesystem::rename(temporary, path);
  } catch (const std::filesystem::filesystem_error& e) {
    remove_temporary();
    throw UsageError(path.string() + ": cannot write the file (" + e.code().message() + ")");
  } catch (const UsageError& e) {
    remove_temporary();
    std::string message = e.what();  // name the file the user asked for, not the temporary
    const std::string temporary_name = temporary.string();
    if (message.rfind(temporary_name, 0) == 0)
      message = path.string() + message.substr(temporary_name.size());
    throw UsageError(message);
  } catch (...) {
    remove_temporary();
    throw;
  }
}

void write_file_atomically(const std::filesystem::path& path, const std::string& content) {
  write_file_atomically(path, [&](const std::filesystem::path& temporary) {
    std::ofstream out(temporary, std::ios::binary | std::ios::trunc);
    out.write(content.data(), std::streamsize(content.size()));
    out.close();
    if (!out) throw UsageError(path.string() + ": cannot write the file");
  });
}

}  // namespace lab
