// Ultralytics `.pt` checkpoints (the torch.save zip format) -> Checkpoint: the restricted pickle of
// `<prefix>/data.pkl`, the model (`ema` when present and not None, else `model`), its module tree walked
// into state-dict keys exactly as torch names them, tensors gathered from `<prefix>/data/<key>` storages.
#pragma once
#include <filesystem>

#include "pipeline/checkpoint/checkpoint.hpp"

namespace lab {

Checkpoint load_torch_checkpoint(const std::filesystem::path& path);

}  // namespace lab
