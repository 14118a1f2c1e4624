// load_nccl: dlopen + dlsym of the NCCL functions, cached per library path.
#include "pipeline/distributed/nccl_library.hpp"

#include <dlfcn.h>

#include <cstdlib>
#include <map>
#include <mutex>

#include "nvrtc_runtime/errors.hpp"

namespace lab {
namespace {

UsageError unavailable(const std::string& origin, const std::string& why) {
  return UsageError(origin + ": NCCL is not available (" + why +
                    "); set LAB_NCCL_LIBRARY=/path/libnccl.so.2 or install NCCL (the nvidia-nccl-cu13 wheel, "
                    "or Debian's libnccl2)");
}

template <class Function>
void find(void* handle, const char* name, Function& function, const std::string& path,
          const std::string& origin) {
  function = reinterpret_cast<Function>(dlsym(handle, name));
  if (!function) throw unavailable(origin, path + " has no " + name);
}

}  // namespace

const NcclLibrary& load_nccl(const std::string& origin) {
  static std::mutex mutex;
  static std::map<std::string, NcclLibrary> loaded;
  const char* chosen = std::getenv("LAB_NCCL_LIBRARY");
  const std::string path = chosen && *chosen ? chosen : "libnccl.so.2";
  std::lock_guard<std::mutex> lock(mutex);
  if (auto it = loaded.find(path); it != loaded.end()) return it->second;

  void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!handle) {
    const char* why = dlerror();
    throw unavailable(origin, why ? why : path + ": cannot be opened");
  }
  NcclLibrary nccl;
  nccl.path = path;
  try {
    find(handle, "ncclGetVersion", nccl.get_version, path, origin);
    find(handle, "ncclGetErrorString", nccl.get_error_string, path, origin);
    find(handle, "ncclGetUniqueId", nccl.get_unique_id, path, origin);
    find(handle, "ncclCommInitRank", nccl.comm_init_rank, path, origin);
    find(handle, "ncclCommDestroy", nccl.comm_destroy, path, origin);
    find(handle, "ncclCommAbort", nccl.comm_abort, path, origin);
    find(handle, "ncclCommGetAsyncError", nccl.comm_get_async_error, path, origin);
    find(handle, "ncclAllReduce", nccl.all_reduce, path, origin);
    find(handle, "ncclBroadcast", nccl.broadcast, path, origin);
    find(handle, "ncclGroupStart", nccl.group_start, path, origin);
    find(handle, "ncclGroupEnd", nccl.group_end, path, origin);
  } catch (...) {
    dlclose(handle);
    throw;
  }
  // The handle stays open for the process: communicators and their CUDA work may outlive any caller.
  return loaded.emplace(path, std::move(nccl)).first->second;
}

}  // namespace lab
