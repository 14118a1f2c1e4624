// A shared library opened at run time (dlopen, never linked) with its functions bound into a struct of typed
// pointers, once per path for the process: NCCL (distributed/nccl_library.hpp) and nvJPEG
// (image/nvjpeg_library.hpp), so `lab` starts and runs everything else where they are absent.
#pragma once
#include <functional>
#include <map>
#include <mutex>
#include <string>

#include "nvrtc_runtime/errors.hpp"

namespace lab {

// The caller's one-line error for a library that cannot be used, given why (dlerror's text, or
// "<path> has no <function>").
using LibraryUnavailable = std::function<UsageError(const std::string& why)>;

// The library while its functions are bound: opened by the constructor, closed by the destructor unless
// keep() was called (then it stays open for the process: work the library started may outlive any caller).
class RuntimeLibraryBinder {
 public:
  // Throws unavailable(dlerror's text) when the library cannot be opened.
  RuntimeLibraryBinder(const std::string& path, LibraryUnavailable unavailable);
  ~RuntimeLibraryBinder();
  RuntimeLibraryBinder(const RuntimeLibraryBinder&) = delete;
  RuntimeLibraryBinder& operator=(const RuntimeLibraryBinder&) = delete;

  // Sets `function` to the library's `name`; throws unavailable("<path> has no <name>") when it is missing.
  template <class Function>
  void bind(const char* name, Function& function) {
    function = reinterpret_cast<Function>(symbol(name));
  }
  void keep() { handle_ = nullptr; }

 private:
  void* symbol(const char* name) const;
  std::string path_;
  LibraryUnavailable unavailable_;
  void* handle_ = nullptr;
};

// `Library` (a struct with `std::string path` and the function pointers) for `path`, made on the first call
// by bind_all(binder, library) and kept for the process; later calls return the same one.
template <class Library, class BindAll>
const Library& load_runtime_library(const std::string& path, const LibraryUnavailable& unavailable,
                                    BindAll&& bind_all) {
  static std::mutex mutex;
  static std::map<std::string, Library> loaded;
  std::lock_guard<std::mutex> lock(mutex);
  if (auto it = loaded.find(path); it != loaded.end()) return it->second;
  RuntimeLibraryBinder binder(path, unavailable);
  Library library;
  library.path = path;
  bind_all(binder, library);
  binder.keep();
  return loaded.emplace(path, std::move(library)).first->second;
}

}  // namespace lab
