// The way back from a (trained) Yolo26Model to a Checkpoint: the base checkpoint's state dict with every
// convolution's checkpoint parameters (conv.weight, bn.weight, bn.bias, the running statistics the model
// holds, and the plain Conv2d weight/bias of the head's last convs) taken from the model as float32, and the
// class names, nc and model.yaml's nc taken from the model. What `lab train` saves as weights/last and best
// (save_trained_weights: safetensors and a torch state-dict .pt side by side).
#pragma once
#include <filesystem>
#include <string>
#include <utility>

#include "pipeline/checkpoint/checkpoint.hpp"
#include "pipeline/checkpoint/torch_checkpoint_writer.hpp"
#include "pipeline/model/yolo26_model.hpp"

namespace lab::train {

// Tensors of `base` the model does not describe stay as they are; those it does are replaced, shapes
// included (a re-initialised class count changes the class branches' last convs). UsageError when the
// model's class names do not number its nc.
Checkpoint checkpoint_of(const Yolo26Model& trained, const Checkpoint& base);

// weights/last and best: checkpoint_of(trained, base) written as `<folder>/<stem>.safetensors` and as the
// torch state-dict `<folder>/<stem>.pt` (with `record`), each atomically; returns the two paths.
std::pair<std::filesystem::path, std::filesystem::path> save_trained_weights(
    const Yolo26Model& trained, const Checkpoint& base, const std::filesystem::path& folder,
    const std::string& stem, const TrainingRecord& record);

}  // namespace lab::train
