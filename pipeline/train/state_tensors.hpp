// Every float tensor of a conv that the model's state dict holds, by state-dict name, in its order: an
// Ultralytics Conv's conv.weight, bn.weight, bn.bias, bn.running_mean, bn.running_var; a plain Conv2d's
// weight and bias. What the EMA averages and a training state saves. Conv is ConvSpec or const ConvSpec.
#pragma once
#include <string>
#include <utility>
#include <vector>

#include "pipeline/model/yolo26_model.hpp"

namespace lab::train {

template <class Conv>
auto state_tensors(Conv& conv) {
  using Tensor = decltype(&conv.weight);
  std::vector<std::pair<std::string, Tensor>> tensors;
  if (!conv.bn)
    return decltype(tensors){{conv.name + ".weight", &conv.weight}, {conv.name + ".bias", &conv.bias}};
  return decltype(tensors){{conv.name + ".conv.weight", &conv.conv_weight},
                           {conv.name + ".bn.weight", &conv.bn->gamma},
                           {conv.name + ".bn.bias", &conv.bn->beta},
                           {conv.name + ".bn.running_mean", &conv.bn->mean},
                           {conv.name + ".bn.running_var", &conv.bn->var}};
}

}  // namespace lab::train
