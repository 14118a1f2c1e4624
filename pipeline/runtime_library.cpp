// RuntimeLibraryBinder: dlopen (RTLD_NOW | RTLD_LOCAL), dlsym, dlclose.
#include "pipeline/runtime_library.hpp"

#include <dlfcn.h>

namespace lab {

RuntimeLibraryBinder::RuntimeLibraryBinder(const std::string& path, LibraryUnavailable unavailable)
    : path_(path), unavailable_(std::move(unavailable)) {
  handle_ = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!handle_) {
    const char* why = dlerror();
    throw unavailable_(why ? why : path + ": cannot be opened");
  }
}

RuntimeLibraryBinder::~RuntimeLibraryBinder() {
  if (handle_) dlclose(handle_);
}

void* RuntimeLibraryBinder::symbol(const char* name) const {
  void* found = dlsym(handle_, name);
  if (!found) throw unavailable_(path_ + " has no " + name);
  return found;
}

}  // namespace lab
