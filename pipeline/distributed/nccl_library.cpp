// load_nccl: the NCCL functions bound through runtime_library.hpp, once per library path.
#include "pipeline/distributed/nccl_library.hpp"

#include <cstdlib>

#include "nvrtc_runtime/errors.hpp"
#include "pipeline/runtime_library.hpp"

namespace lab {
namespace {

UsageError unavailable(const std::string& origin, const std::string& why) {
  return UsageError(origin + ": NCCL is not available (" + why +
                    "); set LAB_NCCL_LIBRARY=/path/libnccl.so.2 or install NCCL (the nvidia-nccl-cu13 wheel, "
                    "or Debian's libnccl2)");
}

}  // namespace

const NcclLibrary& load_nccl(const std::string& origin) {
  const char* chosen = std::getenv("LAB_NCCL_LIBRARY");
  const std::string path = chosen && *chosen ? chosen : "libnccl.so.2";
  const LibraryUnavailable why = [&](const std::string& reason) { return unavailable(origin, reason); };
  return load_runtime_library<NcclLibrary>(path, why, [](RuntimeLibraryBinder& library, NcclLibrary& nccl) {
    library.bind("ncclGetVersion", nccl.get_version);
    library.bind("ncclGetErrorString", nccl.get_error_string);
    library.bind("ncclGetUniqueId", nccl.get_unique_id);
    library.bind("ncclCommInitRank", nccl.comm_init_rank);
    library.bind("ncclCommDestroy", nccl.comm_destroy);
    library.bind("ncclCommAbort", nccl.comm_abort);
    library.bind("ncclCommGetAsyncError", nccl.comm_get_async_error);
    library.bind("ncclAllReduce", nccl.all_reduce);
    library.bind("ncclBroadcast", nccl.broadcast);
    library.bind("ncclGroupStart", nccl.group_start);
    library.bind("ncclGroupEnd", nccl.group_end);
  });
}

}  // namespace lab
