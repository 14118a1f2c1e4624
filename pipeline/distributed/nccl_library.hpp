// NCCL loaded at run time: `lab` never links libnccl, so it starts and every command without --devices works
// where NCCL is absent. The library is LAB_NCCL_LIBRARY when set (e.g. PyTorch's
// site-packages/nvidia/nccl/lib/libnccl.so.2), else "libnccl.so.2" by the dynamic loader's search.
#pragma once
#include <nccl.h>

#include <string>

namespace lab {

// The handful of NCCL functions the communicators use.
struct NcclLibrary {
  std::string path;  // what was opened
  ncclResult_t (*get_version)(int*) = nullptr;
  const char* (*get_error_string)(ncclResult_t) = nullptr;
  ncclResult_t (*get_unique_id)(ncclUniqueId*) = nullptr;
  ncclResult_t (*comm_init_rank)(ncclComm_t*, int, ncclUniqueId, int) = nullptr;
  ncclResult_t (*comm_destroy)(ncclComm_t) = nullptr;
  ncclResult_t (*comm_abort)(ncclComm_t) = nullptr;
  ncclResult_t (*comm_get_async_error)(ncclComm_t, ncclResult_t*) = nullptr;
  ncclResult_t (*all_reduce)(const void*, void*, size_t, ncclDataType_t, ncclRedOp_t, ncclComm_t,
                             cudaStream_t) = nullptr;
  ncclResult_t (*broadcast)(const void*, void*, size_t, ncclDataType_t, int, ncclComm_t,
                            cudaStream_t) = nullptr;
  ncclResult_t (*group_start)() = nullptr;
  ncclResult_t (*group_end)() = nullptr;
};

// Opens the library once per path and keeps it for the process. Throws UsageError "<origin>: NCCL is not
// available (<dlerror>); set LAB_NCCL_LIBRARY=/path/libnccl.so.2 or install NCCL (the nvidia-nccl-cu13 wheel,
// or Debian's libnccl2)", also when a function is missing from it.
const NcclLibrary& load_nccl(const std::string& origin);

}  // namespace lab
