// Checkpoint <-> safetensors interchange file (layout in docs/checkpoints.md): every state-dict tensor in
// its stored dtype, and names / nc / scale / yaml as __metadata__ with "format": "yolo26-kernel-lab".
#pragma once
#include <filesystem>

#include "pipeline/checkpoint/checkpoint.hpp"

namespace lab {

constexpr const char* kCheckpointFormatTag = "yolo26-kernel-lab";

// Loads ours (metadata restored exactly) or any safetensors state dict (names "class0".., nc from the head's
// last conv, else from a "nc" metadata entry). Non-float tensors are skipped, as in .pt files.
Checkpoint load_safetensors_checkpoint(const std::filesystem::path& path);

}  // namespace lab
