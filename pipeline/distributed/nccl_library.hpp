// NCCL loaded at run time: `lab` never links libnccl, so it starts and every command without --devices works
// where NCCL is absent. The library is LAB_NCCL_LIBRARY when set (e.g. PyTorch's
// site-packages/nvidia/nccl/lib/libnccl.so.2), else "libnccl.so.2" by the dynamic loader's search.
#pragma once
#include <nccl.h>

#include <string>

namespace lab {

// The handful of NCCL functions the communicators use, typed from nccl.h's declarations (decltype never
// references the symbols, so nothing is linked).
struct NcclLibrary {
  std::string path;  // what was opened
  decltype(&ncclGetVersion) get_version = nullptr;
  decltype(&ncclGetErrorString) get_error_string = nullptr;
  decltype(&ncclGetUniqueId) get_unique_id = nullptr;
  decltype(&ncclCommInitRank) comm_init_rank = nullptr;
  decltype(&ncclCommDestroy) comm_destroy = nullptr;
  decltype(&ncclCommAbort) comm_abort = nullptr;
  decltype(&ncclCommGetAsyncError) comm_get_async_error = nullptr;
  decltype(&ncclAllReduce) all_reduce = nullptr;
  decltype(&ncclBroadcast) broadcast = nullptr;
  decltype(&ncclGroupStart) group_start = nullptr;
  decltype(&ncclGroupEnd) group_end = nullptr;
};

// Opens the library once per path and keeps it for the process. Throws UsageError "<origin>: NCCL is not
// available (<dlerror>); set LAB_NCCL_LIBRARY=/path/libnccl.so.2 or install NCCL (the nvidia-nccl-cu13 wheel,
// or Debian's libnccl2)", also when a function is missing from it.
const NcclLibrary& load_nccl(const std::string& origin);

}  // namespace lab
