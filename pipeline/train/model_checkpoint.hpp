// The way back from a (trained) Yolo26Model to a Checkpoint: the base checkpoint's state dict with every
// convolution's checkpoint parameters (conv.weight, bn.weight, bn.bias, the running statistics the model
// holds, and the plain Conv2d weight/bias of the head's last convs) taken from the model as float32, and the
// class names, nc and model.yaml's nc taken from the model. What `lab train` saves as weights/last and best.
#pragma once
#include "pipeline/checkpoint/checkpoint.hpp"
#include "pipeline/model/yolo26_model.hpp"

namespace lab::train {

// Tensors of `base` the model does not describe stay as they are; those it does are replaced, shapes
// included (a re-initialised class count changes the class branches' last convs). UsageError when the
// model's class names do not number its nc.
Checkpoint checkpoint_of(const Yolo26Model& trained, const Checkpoint& base);

}  // namespace lab::train
