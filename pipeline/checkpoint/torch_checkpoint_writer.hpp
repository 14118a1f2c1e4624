// Writes a checkpoint as a torch state-dict `.pt`: the torch.save zip layout (<archive>/data.pkl in pickle
// protocol 2, <archive>/byteorder, <archive>/data/<key> raw little-endian storages on 64-byte boundaries,
// <archive>/version) holding a dict that torch.load(path, weights_only=True) accepts:
//   {"model": OrderedDict(name -> tensor), "names": {0: "person", ...}, "nc": int, "scale": str,
//    "yaml": dict, "epoch": int, "train_metrics": {str: float}, "format": "yolo26-kernel-lab"}
// Tensors are torch._utils._rebuild_tensor_v2 views of persistent-id storages in their stored dtype
// (F32 -> torch.FloatStorage, F16 -> HalfStorage, BF16 -> BFloat16Storage, F64 -> DoubleStorage); each
// BatchNorm's `num_batches_tracked` (which a Checkpoint does not keep) is written as an int64 0 (LongStorage)
// after its running_var, so torch's strict load_state_dict finds every key it expects.
// load_checkpoint reads such a file back (docs/checkpoints.md).
#pragma once
#include <filesystem>
#include <map>
#include <string>

#include "pipeline/checkpoint/checkpoint.hpp"

namespace lab {

// What a training run adds beside the weights.
struct TrainingRecord {
  long long epoch = -1;                         // the last completed epoch (-1: not from a training run)
  std::map<std::string, double> train_metrics;  // "metrics/mAP50-95(B)" -> value, ...
};

// Atomically (temporary file + rename). The archive folder is the file's stem ("last" for last.pt), as
// torch.save names it, or "archive" when the stem has other characters than letters, digits, '_' and '-'.
void save_checkpoint_pt(const Checkpoint& checkpoint, const std::filesystem::path& path,
                        const TrainingRecord& record = {});

}  // namespace lab
